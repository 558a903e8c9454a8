// Layout encodings: named descriptions of which thread holds which tensor element.
//
// A tensor type in the tile IR may carry an Encoding. Passes speak in named encodings
// (Blocked, Slice, later Mma/DotOperand/Shared); code generation uses only the LinearLayout
// that each encoding builds for a concrete shape (see linear_layout.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

class LinearLayout;

class Encoding {
public:
  virtual ~Encoding() = default;
  /// Text form used by the IR printer and parser, e.g.
  /// "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>".
  virtual std::string str() const = 0;
  virtual bool equals(const Encoding &other) const = 0;
  /// Rank of the tensors this encoding applies to.
  virtual int rank() const = 0;
  /// The linear layout from hardware indices (register, lane, warp, block) to tensor
  /// coordinates for a tensor of this shape (power-of-two extents).
  virtual LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const = 0;
};

using EncodingPtr = std::shared_ptr<const Encoding>;

/// Parses the text form written by Encoding::str(). Throws std::runtime_error with a message
/// naming the offending text when it is malformed.
EncodingPtr parseEncoding(const std::string &text);

} // namespace tessera
