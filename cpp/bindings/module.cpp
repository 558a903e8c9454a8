// The _tessera Python module: one submodule per part of the core, each bound in its own file.
#include "bindings.h"

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's C++ core: tile IR, passes, code generation and the CUDA runtime.";
  auto ir = m.def_submodule("ir", "Tile IR: types, ops, builder, parser");
  auto passes = m.def_submodule("passes", "Pass manager and named passes");
  auto codegen = m.def_submodule("codegen", "Tile IR -> LLVM IR -> PTX");
  auto runtime = m.def_submodule("runtime", "CUDA driver: modules and launches");
  tessera::bindings::bindIR(ir);
  tessera::bindings::bindPasses(passes);
  tessera::bindings::bindCodegen(codegen);
  tessera::bindings::bindRuntime(runtime);
}
