// Small helpers shared by the target-neutral cleanup passes (canonicalize, cse, dce, licm):
// side-effect queries and dead-op removal; and the entry points of the three passes codegen
// runs itself on IR that has not been through them (allocate_shared, membar, wgmma_waits).
// The passes register by name (TESSERA_REGISTER_PASS) and are run through the PassManager.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

/// True when removing `op` (once its results are unused) cannot change what the program does:
/// a pure non-terminator op, or a `for`/`if` whose regions hold only such ops (and yields).
bool isSideEffectFree(const Operation &op);

/// Side-effect free and none of its results is used.
bool isTriviallyDead(const Operation &op);

/// Erases trivially dead ops of `block` and of the regions nested in it, to a fixpoint.
/// Returns whether anything was erased.
bool eraseDeadOps(Block &block);

/// Erases those of `ops` that are trivially dead, then the defining ops of their former
/// operands that became dead through them (a local clean-up after a rewrite).
void eraseIfDead(const std::vector<Operation *> &ops);

} // namespace tessera::ir

namespace tessera::transforms {

/// The allocate_shared pass (allocate_shared.cpp): offsets of every shared-memory buffer.
void allocateShared(ir::Module &module);
/// The membar pass (membar.cpp): barriers where threads could race on shared memory.
void insertBarriers(ir::Module &module);
/// The wgmma_waits pass (wgmma_waits.cpp): `wgmma_wait` ops where wgmma groups must retire.
void placeWgmmaWaits(ir::Module &module);
/// The warpgroup_pingpong pass (warpgroup_pingpong.cpp): with module attribute `pingpong`,
/// the two warpgroups take turns at issuing each loop's wgmma products.
void pingpongWarpgroups(ir::Module &module);

} // namespace tessera::transforms
