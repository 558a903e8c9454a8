// Parses the text form written by the printer (printer.h) back into a Module.
// Errors throw CompileError with "line:col" of the text and what was expected.
#pragma once

#include "ir/ir.h"

#include <memory>
#include <string>

namespace tessera::ir {

std::unique_ptr<Module> parseModule(const std::string &text);

} // namespace tessera::ir
