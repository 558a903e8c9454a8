// Internal interface of the tensor-core lowering: dot on mma.sync or FMA units, trans,
// conversions into dot-operand layouts through swizzled shared memory read with ldmatrix, and
// the shared-memory ops of the software pipeliner (local_alloc, local_load, async_copy, ...).
// lower_to_llvm.cpp's dispatch hands these ops here first.
#pragma once

#include "codegen/lower_to_llvm.h"
#include "layout/mma.h"
#include "layout/shared_tile_layout.h"

#include <map>
#include <vector>

namespace tessera::codegen {

/// Lowers `op` when it is one of the ops above (or a convert_layout into an #mma dot-operand
/// layout that needs shared memory) and returns true; false leaves it to the generic lowering.
bool lowerTensorCoreOp(KernelLowering &lowering, const ir::Operation &op);

// ---- lower_matrix.cpp ---------------------------------------------------------------------------
using Coords = std::vector<int32_t>;
/// The tensor coordinates register `reg` of `layout` holds at lane 0, warp 0.
Coords coordsOf(const LinearLayout &layout, int reg);
/// Lane-0, warp-0 coordinates -> the first register holding them (the FMA and wgmma paths).
std::map<Coords, int> registersByCoords(const LinearLayout &layout);
/// dot: mma.sync (m16n8k16 f16/bf16, m16n8k8 tf32, tf32x3) for an #mma result, FMA for a
/// Blocked one.
void lowerDot(KernelLowering &lowering, const ir::Operation &op);
/// dot on wgmma (an #mma version 3 result; operands in shared memory): lower_matrix_wgmma.cpp.
void lowerWgmmaDot(KernelLowering &lowering, const ir::Operation &op, const MmaEncoding &mma);
/// How many register A words (32-bit) `dot` on wgmma passes to its wait (`inputs` below): 0
/// when A is in shared memory (a local_load). A loop carries that many with a group left in
/// flight across its back edge (KernelLowering::lowerFor).
size_t wgmmaRegisterInputCount(const ir::Operation &dot, const MmaEncoding &mma);
/// wgmma.wait_group `pending` (at most that many groups still in flight), tying `registers`
/// (accumulators, rewritten in place: their uses stay below the wait) and using `inputs`
/// (register A words: they stay live, unrewritten, until it).
void emitWgmmaWait(KernelLowering &lowering, Registers &registers, int pending,
                   const std::vector<llvm::Value *> &inputs = {});
/// trans: a relabeling of the operand's registers (accelerate_matmul makes it one).
void lowerTrans(KernelLowering &lowering, const ir::Operation &op);

// ---- lower_shared_buffers.cpp -------------------------------------------------------------------
/// Stores `source` (registers of `layout`) into the tile at `base` (addrspace 3), one 16-byte
/// (at most) access per group of consecutive registers, skipping duplicate registers.
void storeToSharedTile(KernelLowering &lowering, const ir::Operation &op, const Registers &source,
                       const LinearLayout &layout, const SharedTileLayout &tile, llvm::Value *base,
                       const ir::Type &elementType);
/// Loads the registers of `layout` from the tile at `base`: ldmatrix when a plan exists
/// (layout/ldmatrix.h), else vectorized ld.shared.
Registers loadFromSharedTile(KernelLowering &lowering, const ir::Operation &op,
                             const LinearLayout &layout, const SharedTileLayout &tile,
                             llvm::Value *base, const ir::Type &elementType);

} // namespace tessera::codegen
