// allocate_shared: every shared-memory buffer of each func (local_alloc rings and staged
// tiles, the scratch of conversions, reductions, scans and atomics) gets its byte offset in
// the kernel's one dynamic shared-memory region, and the func its `shared_size`. The
// allocation itself (live ranges, first fit, reuse across disjoint live ranges) is an analysis:
// analysis/allocation.h. Input: tgir after the pipeliner and materialize_wgmma_operands (the
// last passes to create buffers or scratch); membar reads the offsets next.
#include "transforms/passes.h"

#include "analysis/allocation.h"
#include "ir/pass_manager.h"

namespace tessera::transforms {

void allocateShared(ir::Module &module) {
  for (ir::Operation *func : module.functions())
    analysis::SharedAllocation(*func).apply();
}

TESSERA_REGISTER_PASS(allocate_shared, "allocate_shared",
                      "Give every shared-memory buffer (local_alloc, per-op scratch) an offset, "
                      "reusing bytes across disjoint live ranges; set the func's shared_size",
                      allocateShared);

} // namespace tessera::transforms
