// TEMPORARY stub, replaced by the codegen bindings.
#include "bindings.h"
namespace tessera::bindings { void bindCodegen(pybind11::module_ &) {} }
