// Small integer helpers shared by the layout encodings: power-of-two checks and the "[a, b]"
// text form of integer lists used in encoding strings.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::layout_util {

inline bool isPowerOfTwo(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

inline std::string joinInts(const std::vector<int> &values) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < values.size(); ++i)
    os << (i ? ", " : "") << values[i];
  os << "]";
  return os.str();
}

} // namespace tessera::layout_util
