// Errors raised by the compiler core. Each names the op's source location when known, so the
// Python side can point at the kernel's file:line:col.
#pragma once

#include <stdexcept>
#include <string>

namespace tessera::ir {

class Operation;

class CompileError : public std::runtime_error {
public:
  CompileError(const std::string &message, std::string location = "")
      : std::runtime_error(location.empty() ? message : location + ": " + message),
        message_(message), location_(std::move(location)) {}
  const std::string &message() const { return message_; }
  const std::string &location() const { return location_; }

private:
  std::string message_;
  std::string location_;
};

/// Throws a CompileError about `op` (its location, its name).
[[noreturn]] void emitError(const Operation &op, const std::string &message);

} // namespace tessera::ir
