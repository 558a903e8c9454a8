// TEMPORARY stub, replaced by the runtime bindings.
#include "bindings.h"
namespace tessera::bindings { void bindRuntime(pybind11::module_ &) {} }
