// DotOperandEncoding: the register layout of a dot's A (opIdx 0) or B (opIdx 1) operand as
// the mma.sync instructions of its parent MmaEncoding read it, as Triton's #ttg.dot_op. With
// a Blocked parent (the FMA path of input_precision "ieee") each thread holds, for every row
// (A) or column (B) of its accumulator elements, the whole K extent.
//
// accelerate_matmul converts dot operands to it; codegen fills it from shared memory with
// ldmatrix (lower_dot_operand.cpp) or, for a previous dot's result cast to 16 bits, keeps the
// registers where they are (the Mma and DotOperand(opIdx 0, kWidth 2) layouts coincide when
// all warps lie along M).
#pragma once

#include "layout/encoding.h"
#include "layout/linear_layout.h"
#include "layout/mma.h"

#include <memory>

namespace tessera {

class DotOperandEncoding : public Encoding {
public:
  /// opIdx 0 (A, [M, K]) or 1 (B, [K, N]); parent an MmaEncoding or a rank-2
  /// BlockedEncoding; kWidth the consecutive elements along K a thread holds per 32-bit
  /// register: 32 / element bits (2 for f16/bf16, 1 for tf32; 1 with a Blocked parent).
  /// Throws std::invalid_argument otherwise.
  DotOperandEncoding(int opIdx, EncodingPtr parent, int kWidth);

  int getOpIdx() const { return opIdx; }
  const EncodingPtr &getParent() const { return parent; }
  /// The parent as an MmaEncoding, or null for a Blocked parent.
  const MmaEncoding *getMmaParent() const { return mma; }
  int getKWidth() const { return kWidth; }
  /// K of one mma instruction for this operand: 8 * kWidth (m16n8k16 for 16-bit, m16n8k8 for
  /// tf32).
  int getInstrK() const { return 8 * kWidth; }
  /// Elements of one instruction's fragment per thread: 4 * kWidth for A, 2 * kWidth for B.
  int getFragmentSize() const { return (opIdx == 0 ? 4 : 2) * kWidth; }

  std::string str() const override;
  bool equals(const Encoding &other) const override;
  int rank() const override { return 2; }
  /// Per instruction (PTX ISA "Matrix Fragments for mma.m16n8k16" / "mma.m16n8k8"):
  ///  A [16 x 8kWidth]: registers step k by 1 .. kWidth/2, then m by 8, then k by 4 kWidth;
  ///                    lanes step k by kWidth, 2 kWidth, then m by 1, 2, 4.
  ///  B [8kWidth x 8]:  registers step k by 1 .. kWidth/2, then k by 4 kWidth;
  ///                    lanes step k by kWidth, 2 kWidth, then n by 1, 2, 4.
  /// Warps follow the parent (N bits first, then M; M first for wgmma); the dim the operand
  /// lacks is broadcast. With a wgmma parent, A's registers are what wgmma reads from
  /// registers (the m16n8k16 fragment per warp); B is read from shared memory through a
  /// descriptor, and its layout (registers stepping n by 8 up to the instruction's N after
  /// the m16n8k16 B steps) only names the elements a warp's instructions consume.
  /// Registers repeat the tile along K first, then M (A); along N first, then K (B).
  /// Blocked parent: the parent's layout of [M, 1] (A) or [1, N] (B), i.e. its bases along
  /// the operand's M (N) dim with the other dim broadcast, and the K extent in registers,
  /// consecutive registers stepping K.
  LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const override;

private:
  int opIdx;
  EncodingPtr parent;
  const MmaEncoding *mma;
  int kWidth;

  LinearLayout toBlockedOperandLayout(const std::vector<int64_t> &shape) const;
};

/// Whether `encoding` is a #dot_op of a wgmma (#mma version 3) parent: such an operand lives
/// in shared memory, read by wgmma through a descriptor.
inline bool isWgmmaOperand(const Encoding *encoding) {
  const auto *operand = dynamic_cast<const DotOperandEncoding *>(encoding);
  return operand && operand->getMmaParent() && operand->getMmaParent()->isWgmma();
}

/// kWidth of a dot operand of this element width in bits: 32 / bits (at least 1).
inline int dotOperandKWidth(int elementBits) { return elementBits >= 32 ? 1 : 32 / elementBits; }

} // namespace tessera
