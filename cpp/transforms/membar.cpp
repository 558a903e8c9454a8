// membar: inserts `barrier` ops where threads could race on shared memory, in each func. The
// analysis (read/write byte ranges since the last barrier, loops to a fixed point) is
// analysis/membar.h. Input: tgir after allocate_shared (it reads the offsets).
#include "transforms/passes.h"

#include "analysis/membar.h"
#include "ir/pass_manager.h"

namespace tessera::transforms {

void insertBarriers(ir::Module &module) {
  bool wgmmaInFlight = analysis::wgmmaPipelining(module);
  for (ir::Operation *func : module.functions())
    analysis::insertBarriers(*func, wgmmaInFlight);
}

TESSERA_REGISTER_PASS(membar, "membar",
                      "Insert barriers where threads could race on shared memory (read/write "
                      "intervals since the last barrier; loops to a fixed point)",
                      insertBarriers);

} // namespace tessera::transforms
