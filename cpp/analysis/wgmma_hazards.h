// A check of membar's wgmma groups (test only): runs a func's loops for a few iterations with
// concrete ring slots and reports every shared-memory write that may overlap bytes a wgmma
// group still reads, i.e. one no barrier waited for in every warp (wgmma_pending, membar.h).
//
// Independent of membar's static analysis (symbolic slots, joins, back edges): only the slot
// counters (shared_access.h) are read the same way, then evaluated per iteration. Codegen's
// waits outside barriers (a result's first use, control flow) complete a warp's own groups
// only: other warps may lag, so only barriers (membar's, and those inside ops with scratch
// or mbarrier setup, which wait for every group) retire groups here.
#pragma once

#include "ir/ir.h"

#include <string>
#include <vector>

namespace tessera::analysis {

/// The hazards of `func` (after membar), one line each: the write's op and location, and the
/// dot whose group reads those bytes. `iterations`: how many times each loop body runs.
std::vector<std::string> findWgmmaHazards(ir::Operation &func, int iterations = 8);

} // namespace tessera::analysis
