// TEMPORARY stub, replaced by the real parser.
#include "ir/parser.h"
#include "ir/diagnostics.h"
namespace tessera::ir {
std::unique_ptr<Module> parseModule(const std::string &) { throw CompileError("parser not built yet"); }
}
