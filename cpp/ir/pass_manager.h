// Passes, named pipelines and the pass manager. A pass is a named function over a module,
// registered once (TESSERA_REGISTER_PASS in the pass's own file) so that tessera-opt (--name),
// the pipelines and the dump knob all use the same name. A pipeline is a named, ordered list of
// passes (one compile stage: "tir", "tgir"; registered in transforms/pass_pipelines.cpp) with
// options that set the module attributes its passes read (num_warps, num_stages, ...); the
// Python driver and `tessera-opt --pass-pipeline=tgir` both run it from this one registry.
// The manager verifies after every pass and prints the IR after the passes named in its dump
// set.
#pragma once

#include "ir/ir.h"

#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
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

/// Option values of a pipeline, by option name, as text ("4", "sm_90a").
using PipelineOptionValues = std::map<std::string, std::string>;

struct PipelineOption {
  std::string name;
  std::string description;
};

struct PipelineInfo {
  std::string name;
  std::string description;
  std::vector<std::string> passes;
  std::vector<PipelineOption> options;
  /// Sets the module attributes the given options stand for (only those given: the others
  /// keep what the module has). Values are checked; a bad one throws std::invalid_argument.
  std::function<void(Module &, const PipelineOptionValues &)> configure;
};

void registerPipeline(PipelineInfo info);
const PipelineInfo *lookupPipeline(const std::string &name);
/// In registration order.
std::vector<const PipelineInfo *> registeredPipelines();

/// Parses "name" or "name{opt=value opt=value}" (MLIR's textual form) into the name and the
/// values; throws std::invalid_argument when malformed or for an unknown pipeline (options are
/// checked by PassManager::addPipeline).
std::pair<const PipelineInfo *, PipelineOptionValues> parsePipelineSpec(const std::string &spec);

struct PassManagerOptions {
  bool verifyEach = true;
  std::set<std::string> dumpAfter;    // pass names, or "all"
  std::ostream *dumpStream = nullptr; // default: std::cerr
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}
  /// Adds a registered pass by name; throws std::invalid_argument for an unknown name.
  void add(const std::string &name);
  /// Adds a registered pipeline: at this point of the run, its options set the module's
  /// attributes, then its passes run. Throws std::invalid_argument for an unknown name or
  /// option, or a bad option value.
  void addPipeline(const std::string &name, const PipelineOptionValues &values = {});
  void run(Module &module) const;
  /// The passes, in run order (a pipeline's expanded).
  std::vector<const PassInfo *> passes() const;

private:
  struct Step {
    const PassInfo *pass = nullptr;          // a pass, or
    std::function<void(Module &)> configure; // a pipeline's options
  };
  PassManagerOptions options_;
  std::vector<Step> steps_;
};

struct PassRegistration {
  PassRegistration(const char *name, const char *description, PassFunction run) {
    registerPass(name, description, std::move(run));
  }
};

struct PipelineRegistration {
  explicit PipelineRegistration(PipelineInfo info) { registerPipeline(std::move(info)); }
};

} // namespace tessera::ir

#define TESSERA_REGISTER_PASS(id, name, description, fn)                                           \
  static ::tessera::ir::PassRegistration tesseraPassRegistration_##id(name, description, fn)
