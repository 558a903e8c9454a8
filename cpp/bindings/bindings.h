// Entry points of the binding files, one per submodule of _tessera.
#pragma once
#include <pybind11/pybind11.h>

namespace tessera::bindings {
void bindIR(pybind11::module_ &m);      // ir.cpp
void bindPasses(pybind11::module_ &m);  // passes.cpp
void bindCodegen(pybind11::module_ &m); // codegen.cpp
void bindRuntime(pybind11::module_ &m); // runtime.cpp
} // namespace tessera::bindings
