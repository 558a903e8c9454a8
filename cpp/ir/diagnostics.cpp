// Errors raised by the compiler core.
#include "ir/diagnostics.h"

#include "ir/ir.h"

namespace tessera::ir {

void emitError(const Operation &op, const std::string &message) {
  throw CompileError(std::string("'") + op.name() + "': " + message, op.location());
}

} // namespace tessera::ir
