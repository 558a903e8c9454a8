// Python bindings of code generation (submodule tessera._tessera.codegen): tile IR with
// layouts -> LLVM IR -> PTX. Thin wrappers over codegen/codegen.h.
#include "bindings.h"

#include "codegen/codegen.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace tessera::bindings {

void bindCodegen(py::module_ &m) {
  m.def(
      "generate",
      [](const ir::Module &module, const std::string &arch, int numWarps, int optLevel,
         bool enableFpFusion, const std::string &libdevicePath, int maxnreg, bool keepUnoptimizedIR,
         bool keepLLVMIR) {
        codegen::CodegenOptions options;
        options.arch = arch;
        options.numWarps = numWarps;
        options.optLevel = optLevel;
        options.enableFpFusion = enableFpFusion;
        options.libdevicePath = libdevicePath;
        options.maxnreg = maxnreg;
        options.keepUnoptimizedIR = keepUnoptimizedIR;
        options.keepLLVMIR = keepLLVMIR;
        codegen::CodegenResult result;
        {
          py::gil_scoped_release release; // LLVM's O3 + backend can take a while
          result = codegen::generate(module, options);
        }
        py::dict out;
        out["llvm_ir"] = result.llvmIR;
        out["unoptimized_llvm_ir"] = result.unoptimizedLLVMIR;
        out["ptx"] = result.ptx;
        out["kernel_name"] = result.kernelName;
        out["shared_bytes"] = result.sharedBytes;
        out["num_warps"] = result.numWarps;
        out["total_num_warps"] = result.numWarps + result.producerWarps;
        py::list steps;
        for (const auto &[name, seconds] : result.stepSeconds)
          steps.append(py::make_tuple(name, seconds));
        out["step_seconds"] = steps;
        return out;
      },
      py::arg("module"), py::arg("arch") = "sm_90a", py::arg("num_warps") = 4,
      py::arg("opt_level") = 3, py::arg("enable_fp_fusion") = true, py::arg("libdevice_path") = "",
      py::arg("maxnreg") = 0, py::arg("keep_unoptimized_ir") = true, py::arg("keep_llvm_ir") = true,
      "Compiles the module's kernel to PTX. Returns a dict with llvm_ir (optimized; empty "
      "unless keep_llvm_ir), "
      "unoptimized_llvm_ir (empty unless keep_unoptimized_ir), ptx, kernel_name, "
      "shared_bytes, num_warps, total_num_warps (with a producer warpgroup: the block's "
      "warps) and step_seconds ([(step, wall seconds)]). libdevice_path: "
      "libdevice.10.bc for the math ops that need it (empty: the CUDA default). maxnreg: "
      "the PTX .maxnreg register cap (0: none). Raises "
      "ir.CompileError naming the op's location for anything unsupported.");
  m.def("llvm_version", &codegen::llvmVersion, "The LLVM version the core was built with.");
  m.def(
      "lowering_rules",
      [] {
        py::dict rules;
        for (const auto &[op, rule] : codegen::loweringRules())
          rules[py::str(op)] = rule;
        return rules;
      },
      "{op mnemonic: the codegen entry point that lowers it}, from codegen's dispatch table.");
}

} // namespace tessera::bindings
