// Passes and the pass manager. A pass is a named function over a module, registered once
// (TESSERA_REGISTER_PASS in the pass's own file) so that tessera-opt (--name), the Python
// pipeline and the dump knob all use the same name. The manager verifies after every pass and
// prints the IR after the passes named in its dump set.
#pragma once

#include "ir/ir.h"

#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace tessera::ir {

using PassFunction = std::function<void(Module &)>;

struct PassInfo {
  std::string name;
  std::string description;
  PassFunction run;
};

void registerPass(const std::string &name, const std::string &description, PassFunction run);
const PassInfo *lookupPass(const std::string &name);
std::vector<const PassInfo *> registeredPasses();

struct PassManagerOptions {
  bool verifyEach = true;
  std::set<std::string> dumpAfter; // pass names, or "all"
  std::ostream *dumpStream = nullptr; // default: std::cerr
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}
  /// Adds a registered pass by name; throws std::invalid_argument for an unknown name.
  void add(const std::string &name);
  void run(Module &module) const;
  const std::vector<const PassInfo *> &passes() const { return passes_; }

private:
  PassManagerOptions options_;
  std::vector<const PassInfo *> passes_;
};

struct PassRegistration {
  PassRegistration(const char *name, const char *description, PassFunction run) {
    registerPass(name, description, std::move(run));
  }
};

} // namespace tessera::ir

#define TESSERA_REGISTER_PASS(id, name, description, fn)                                           \
  static ::tessera::ir::PassRegistration tesseraPassRegistration_##id(name, description, fn)
