// The named pipelines: the passes of each compile stage, in order, in one place. The Python
// driver (python/tessera/compiler/compiler.py) runs them through the binding and
// `tessera-opt --pass-pipeline=tgir{num_stages=3 arch=sm_80}` runs the same list.
//
//   tir:  the front end's tile IR, cleaned up (target-neutral; what the interpreter runs), with
//         int64 offsets for tensors past 2**31 elements and, when asked, overflow checks
//   tgir: layouts, tensor cores, software pipelining, shared memory and barriers
//
// Options set module attributes that passes and codegen read; an option not given leaves the
// module's attribute as it is (a module parsed from text carries its own).
#include "ir/pass_manager.h"

#include <stdexcept>

namespace tessera::transforms {

namespace {

using ir::Module;
using ir::PipelineOptionValues;

int64_t integerOption(const std::string &pipeline, const std::string &name, const std::string &text,
                      int64_t minimum) {
  size_t end = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &end);
  } catch (const std::exception &) {
    end = 0;
  }
  if (end == 0 || end != text.size() || value < minimum)
    throw std::invalid_argument("pipeline '" + pipeline + "': option " + name +
                                " must be an integer >= " + std::to_string(minimum) + ", got '" +
                                text + "'");
  return value;
}

/// Sets the module attribute `name` from the option of that name, when given.
void setIntegerAttr(Module &module, const std::string &pipeline, const PipelineOptionValues &values,
                    const std::string &name, int64_t minimum) {
  auto it = values.find(name);
  if (it != values.end())
    module.attributes()[name] = integerOption(pipeline, name, it->second, minimum);
}

const ir::PipelineOption kNumWarps{"num_warps", "warps per program (module attribute num_warps)"};

void configureTir(Module &module, const PipelineOptionValues &values) {
  setIntegerAttr(module, "tir", values, "num_warps", 1);
  setIntegerAttr(module, "tir", values, "check_offsets", 0);
}

/// wgmma exists only on sm_90a: the `wgmma` attribute accelerate_matmul reads is the option
/// (else the module's) and-ed with the arch being sm_90a, when an arch is given.
void configureTgir(Module &module, const PipelineOptionValues &values) {
  setIntegerAttr(module, "tgir", values, "num_warps", 1);
  setIntegerAttr(module, "tgir", values, "num_stages", 0);
  setIntegerAttr(module, "tgir", values, "wgmma", 0);
  setIntegerAttr(module, "tgir", values, "wgmma_overlap", 0);
  setIntegerAttr(module, "tgir", values, "wgmma_pipeline", 0);
  auto arch = values.find("arch");
  if (arch != values.end()) {
    if (arch->second.rfind("sm_", 0) != 0)
      throw std::invalid_argument("pipeline 'tgir': option arch must be like sm_80 or sm_90a, "
                                  "got '" +
                                  arch->second + "'");
    if (arch->second != "sm_90a")
      module.attributes()["wgmma"] = int64_t{0};
  }
}

ir::PipelineRegistration tir(ir::PipelineInfo{
    "tir",
    "the front end's tile IR cleaned up, target-neutral (what the interpreter runs)",
    {"canonicalize", "cse", "dce", "widen_offsets", "check_offsets", "combine_dot_add", "licm",
     "canonicalize", "dce"},
    {kNumWarps,
     {"check_offsets", "1: the narrow arithmetic of pointer offsets checks for overflow (the "
                       "interpreter; the GPU with debug)"}},
    configureTir});

ir::PipelineRegistration tgir(ir::PipelineInfo{
    "tgir",
    "tile IR with layouts: tensor cores, software pipelining, shared memory and barriers",
    {"assign_layouts", "coalesce", "accelerate_matmul", "remove_layout_conversions", "canonicalize",
     "cse", "dce", "licm", "stage_invariant_operands", "pipeline", "materialize_wgmma_operands",
     "canonicalize", "cse", "dce", "allocate_shared", "membar", "wgmma_waits",
     "warpgroup_pingpong"},
    {kNumWarps,
     {"num_stages", "default software-pipelining depth of loops (module attribute num_stages)"},
     {"arch", "target, e.g. sm_80 or sm_90a: wgmma only on sm_90a"},
     {"wgmma", "1: wgmma for the dots that fit (sm_90a), 0: mma.sync"},
     {"wgmma_overlap", "1: a wgmma waits at the first use of its result, 0: right after it"},
     {"wgmma_pipeline", "1: a pipelined loop's wgmma stays in flight across its back edge "
                        "(with wgmma_overlap), 0: each step waits for its product"}},
    configureTgir});

} // namespace

} // namespace tessera::transforms
