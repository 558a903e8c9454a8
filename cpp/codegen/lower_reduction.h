// Lowering of `reduce` and `scan` (codegen stage, beside the other lower_*.cpp files), and the
// pieces both share (lower_reduction_common.cpp): the combiner region inlined on registers, warp
// shuffles of any element type, and which hardware bits of a linear layout carry the
// coordinate bits of the reduced or scanned axis. lower_to_llvm.cpp dispatches both ops here.
#pragma once

#include "codegen/lower_to_llvm.h"

#include <functional>

namespace tessera::codegen {

/// reduce (lower_reduction.cpp), scan (lower_reduction_scan.cpp).
void lowerReduceOp(KernelLowering &lowering, const ir::Operation &op);
void lowerScanOp(KernelLowering &lowering, const ir::Operation &op);

/// One element of each operand of a reduce or scan, held by one thread.
using Elements = std::vector<llvm::Value *>;

/// combine(acc, cur): the op's combiner region inlined at the insertion point.
Elements emitCombine(KernelLowering &lowering, const ir::Operation &op, const Elements &acc,
                     const Elements &cur);

/// shfl.sync.bfly (lane ^ laneMask) and shfl.sync.idx (from sourceLane) over the full warp,
/// for values of up to 64 bits (narrower ones travel in an i32, 64-bit ones as two).
llvm::Value *emitShuffleXor(KernelLowering &lowering, llvm::Value *value, int laneMask);
llvm::Value *emitShuffleIndex(KernelLowering &lowering, llvm::Value *value,
                              llvm::Value *sourceLane);

/// Which hardware bits of a layout carry the coordinate bits of one tensor axis. Each bit
/// (register, lane or warp) whose basis vector touches the axis must move along it alone, by
/// a power of two, and no two may carry the same coordinate bit: true of Blocked layouts and
/// their slices (anything else is rejected with a CompileError).
struct AxisBits {
  enum class Kind { Register, Lane, Warp };
  struct Provider {
    Kind kind;
    int bit; // the hardware bit: register index bit, lane id bit or warp id bit
  };
  int outDim = 0;                  // index of the axis among the layout's output dims
  int sizeLog2 = 0;                // log2 of the axis extent
  std::vector<Provider> providers; // per coordinate bit, least significant first
  int32_t registerMask = 0, laneMask = 0, warpMask = 0; // hardware bits that carry the axis
  int32_t laneBroadcastMask = 0, warpBroadcastMask = 0; // lane/warp bits with zero bases
};
AxisBits analyzeAxisBits(const LinearLayout &layout, int axis, const ir::Operation &op);

/// L(register = reg, lane = 0, warp = 0): the register's coordinates, one per tensor dim.
std::vector<int32_t> registerCoordinates(const LinearLayout &layout, int reg);

/// Row-major linear index (i32) of runtime coordinates in `shape`, skipping dim `skip` (-1:
/// none). `coordinates` are in the layout's output dim order; `layout` names them.
llvm::Value *emitLinearIndex(KernelLowering &lowering, const LinearLayout &layout,
                             const std::vector<llvm::Value *> &coordinates,
                             const std::vector<int64_t> &shape, int skip);

/// Runs `body` only where `predicate` is true (always when it is null).
void emitIf(KernelLowering &lowering, llvm::Value *predicate, const std::function<void()> &body);

} // namespace tessera::codegen
