// Which ops use shared memory while they run, and how many bytes: the one place where the
// shared-memory allocator (allocation.cpp), the barrier analysis (membar.cpp) and the
// lowerings (cpp/codegen) get the sizes from, and the layout decisions behind them (does a
// conversion go through shared memory, which tile does it use, how many warp slots does a
// reduction need). Pure integer code over the linear layouts: no LLVM.
#pragma once

#include "ir/ir.h"
#include "layout/linear_layout.h"
#include "layout/shared_tile_layout.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::analysis {

/// Bytes of one element of `type` in memory: i1 is stored as a byte, pointers as i64.
int64_t memoryElementBytes(const ir::Type &type);

/// The linear layout of a tensor type, from its encoding; throws std::invalid_argument when it
/// has none.
LinearLayout tensorLayout(const ir::Type &type);

// ---- Layout ops: splat, broadcast, expand_dims, reshape, convert_layout ------------------------

/// P = "result hardware index -> operand coordinates": the result's layout with each
/// coordinate sent back to the operand (broadcast zeroes the grown dims, expand_dims drops the
/// new one, reshape re-splits the row-major index). Throws for other ops.
LinearLayout resultLayoutInOperand(const ir::Operation &op, const LinearLayout &resultLayout);

/// Result register -> operand register when the two layouts give every lane and warp the same
/// elements up to a register renaming (no data moves between threads); nullopt otherwise.
std::optional<std::vector<int>> registerPermutation(const LinearLayout &source,
                                                    const LinearLayout &destination);

// ---- Conversions into #mma dot operands, and #shared buffers -------------------------------

/// The dim a shared tile should keep contiguous for `layout`'s stores: the one its
/// consecutive registers step, else the one its first lanes step, else the last.
int fastestDim(const LinearLayout &layout);

/// Whether the convert_layout `op` goes through a swizzled dot-operand tile read by ldmatrix:
/// into an #mma dot operand, rank 2, and more than a register permutation.
bool convertsThroughOperandTile(const ir::Operation &op);
/// The tile of such a conversion.
SharedTileLayout operandConversionTile(const ir::Operation &op);

/// The 1-D or 2-D tile of one slot of a #shared buffer (the buffer itself when it has no ring
/// dim).
SharedTileLayout sharedSlotTile(const ir::Type &bufferType, bool hasRingDim);
/// Whether a local_alloc makes a ring (no source; a slot dim before the 1-D or 2-D tile; slots
/// need not be a power of two).
bool isRingAlloc(const ir::Operation &localAlloc);
/// Bytes of the buffer a local_alloc makes (all slots of a ring).
int64_t localAllocBytes(const ir::Operation &localAlloc);

// ---- Reductions, scans, atomics -----------------------------------------------------------

/// Byte offsets of one section per operand of a reduce or scan, each `count` elements of the
/// operand's memory type, 16-byte aligned; their total in `totalBytes`.
std::vector<int64_t> scratchSections(const ir::Operation &op, int64_t count, int64_t &totalBytes);

/// Whether an atomic op hands its old values to every thread through shared memory: its
/// result is used and other threads hold copies of some element (always for a scalar).
bool atomicPublishesResult(const ir::Operation &op);

// ---- All of it ----------------------------------------------------------------------------

/// Bytes of shared scratch `op` needs while it runs (0: none). The op writes the scratch,
/// synchronizes the CTA itself (a barrier internal to its algorithm), then reads it: the
/// allocator gives it `scratch_offset`, membar orders it against other ops. Layouts that
/// cannot be built count as 0: codegen reports them.
int64_t scratchBytes(const ir::Operation &op);

/// The shared tile a TMA store (TESSERA_TMA_STORE: a `store` with attribute `tma` carrying its
/// tensor map and box coordinates) stages its value in: the 2-D block in the swizzle the
/// host encodes the map with (min(128, row bytes), the wgmma placement; rows over 128 bytes
/// in 128-byte column blocks, one box each). None where the TMA store does not apply (rank
/// other than 2, rows under 32 bytes or not whole swizzle spans, over 256 rows): that store
/// keeps the masked pointer store. Its scratch is this tile, 1 KiB aligned (allocation.cpp).
///
/// A descriptor reduction (TESSERA_TMA_REDUCE: an `atomic_rmw` with `tma`, the same operands)
/// whose kind and element type the TMA reduces (tmaReduction) stages its value in the same
/// tile, under the same rules.
std::optional<SharedTileLayout> tmaStoreTile(const ir::Operation &op);

/// The redOp of cp.reduce.async.bulk.tensor ("add", "min", "max", "and", "or", "xor") that
/// applies an `atomic_rmw`'s kind to its element type, "" where none does (64-bit elements,
/// fp64, xchg).
std::string tmaReduction(const ir::Operation &op);

} // namespace tessera::analysis
