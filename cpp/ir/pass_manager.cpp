// Pass registry and pass manager (verify after each pass, dump IR after chosen passes).
#include "ir/pass_manager.h"

#include "ir/diagnostics.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <iostream>
#include <map>
#include <stdexcept>

namespace tessera::ir {

namespace {
std::map<std::string, PassInfo> &registry() {
  static std::map<std::string, PassInfo> passes;
  return passes;
}
} // namespace

void registerPass(const std::string &name, const std::string &description, PassFunction run) {
  registry()[name] = PassInfo{name, description, std::move(run)};
}

const PassInfo *lookupPass(const std::string &name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<const PassInfo *> registeredPasses() {
  std::vector<const PassInfo *> all;
  for (auto &[name, info] : registry())
    all.push_back(&info);
  return all;
}

void PassManager::add(const std::string &name) {
  const PassInfo *info = lookupPass(name);
  if (!info)
    throw std::invalid_argument("unknown pass '" + name + "'");
  passes_.push_back(info);
}

void PassManager::run(Module &module) const {
  std::ostream &dump = options_.dumpStream ? *options_.dumpStream : std::cerr;
  bool dumpAll = options_.dumpAfter.count("all") != 0;
  for (const PassInfo *pass : passes_) {
    pass->run(module);
    if (options_.verifyEach) {
      try {
        verify(module);
      } catch (const CompileError &e) {
        throw CompileError("IR invalid after pass '" + pass->name + "': " + e.message(),
                           e.location());
      }
    }
    if (dumpAll || options_.dumpAfter.count(pass->name))
      dump << "// -----// IR after " << pass->name << " //----- //\n" << toString(module);
  }
}

} // namespace tessera::ir
