// Parses the text form written by the printer (printer.h) back into a Module.
// Errors throw CompileError with "line:col" of the text and what was expected.
#pragma once

#include "ir/ir.h"

#include <memory>
#include <string>

namespace tessera::ir {

struct ParserOptions {
  /// Prefixed to "line:col" in error locations (tessera-opt passes its input file's name).
  std::string fileName;
  /// Gives each op without an explicit loc("...") the position of its text
  /// ("file:line:col"), so that verifier and pass errors point into the parsed file.
  bool locateOps = false;
};

std::unique_ptr<Module> parseModule(const std::string &text);
/// As parseModule, with a file name for error locations and optional op locations.
std::unique_ptr<Module> parseModuleWithOptions(const std::string &text,
                                               const ParserOptions &options);

} // namespace tessera::ir
