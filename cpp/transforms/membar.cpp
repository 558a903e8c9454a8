// membar: inserts `barrier` ops where threads could race on shared memory, in each func. The
// analysis (read/write byte ranges since the last barrier, loops to a fixed point) is
// analysis/membar.h. Input: tgir after allocate_shared (it reads the offsets).
#include "transforms/passes.h"

#include "analysis/membar.h"
#include "analysis/wgmma_hazards.h"
#include "ir/diagnostics.h"
#include "ir/pass_manager.h"

namespace tessera::transforms {

void insertBarriers(ir::Module &module) {
  bool wgmmaInFlight = analysis::wgmmaPipelining(module);
  bool innerKeep = module.intAttrOr("wgmma_inner_keep", 0) != 0;
  for (ir::Operation *func : module.functions())
    analysis::insertBarriers(*func, wgmmaInFlight, innerKeep);
}

TESSERA_REGISTER_PASS(membar, "membar",
                      "Insert barriers where threads could race on shared memory (read/write "
                      "intervals since the last barrier; loops to a fixed point)",
                      insertBarriers);

/// Test only: fails naming every shared-memory write that may overwrite bytes an in-flight
/// wgmma group still reads (analysis/wgmma_hazards.h: loops run with concrete ring slots).
void checkWgmmaHazards(ir::Module &module) {
  for (ir::Operation *func : module.functions()) {
    std::vector<std::string> hazards = analysis::findWgmmaHazards(*func);
    std::string message;
    for (const std::string &hazard : hazards)
      message += "\n  " + hazard;
    if (!hazards.empty())
      ir::emitError(*func, "wgmma hazards:" + message);
  }
}

TESSERA_REGISTER_PASS(test_wgmma_hazards, "test_wgmma_hazards",
                      "Test only: fail on a shared-memory write that may overwrite what an "
                      "in-flight wgmma reads (loops run with concrete ring slots)",
                      checkWgmmaHazards);

} // namespace tessera::transforms
