// Pass and pipeline registries and the pass manager (verify after each pass, dump IR after
// chosen passes).
#include "ir/pass_manager.h"

#include "ir/diagnostics.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tessera::ir {

namespace {
std::map<std::string, PassInfo> &registry() {
  static std::map<std::string, PassInfo> passes;
  return passes;
}

std::map<std::string, PipelineInfo> &pipelineRegistry() {
  static std::map<std::string, PipelineInfo> pipelines;
  return pipelines;
}

/// Pipeline names in registration order (the compile stages' order: tir, tgir).
std::vector<std::string> &pipelineOrder() {
  static std::vector<std::string> names;
  return names;
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

void registerPipeline(PipelineInfo info) {
  std::string name = info.name;
  if (!pipelineRegistry().count(name))
    pipelineOrder().push_back(name);
  pipelineRegistry()[name] = std::move(info);
}

const PipelineInfo *lookupPipeline(const std::string &name) {
  auto it = pipelineRegistry().find(name);
  return it == pipelineRegistry().end() ? nullptr : &it->second;
}

std::vector<const PipelineInfo *> registeredPipelines() {
  std::vector<const PipelineInfo *> all;
  for (const std::string &name : pipelineOrder())
    all.push_back(&pipelineRegistry().at(name));
  return all;
}

std::pair<const PipelineInfo *, PipelineOptionValues> parsePipelineSpec(const std::string &spec) {
  size_t brace = spec.find('{');
  std::string name = spec.substr(0, brace);
  const PipelineInfo *info = lookupPipeline(name);
  if (!info)
    throw std::invalid_argument("unknown pipeline '" + name + "'");
  PipelineOptionValues values;
  if (brace == std::string::npos)
    return {info, values};
  if (spec.back() != '}')
    throw std::invalid_argument("pipeline '" + spec + "': expected name{option=value ...}");
  std::istringstream items(spec.substr(brace + 1, spec.size() - brace - 2));
  for (std::string item; items >> item;) {
    size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size())
      throw std::invalid_argument("pipeline '" + name + "': expected option=value, got '" + item +
                                  "'");
    values[item.substr(0, equals)] = item.substr(equals + 1);
  }
  return {info, values};
}

void PassManager::add(const std::string &name) {
  const PassInfo *info = lookupPass(name);
  if (!info)
    throw std::invalid_argument("unknown pass '" + name + "'");
  steps_.push_back(Step{info, nullptr});
}

void PassManager::addPipeline(const std::string &name, const PipelineOptionValues &values) {
  const PipelineInfo *info = lookupPipeline(name);
  if (!info)
    throw std::invalid_argument("unknown pipeline '" + name + "'");
  for (const auto &[option, value] : values) {
    bool known = false;
    for (const PipelineOption &candidate : info->options)
      known |= candidate.name == option;
    if (!known)
      throw std::invalid_argument("pipeline '" + name + "' has no option '" + option + "'");
  }
  if (info->configure) {
    Module scratch; // the values are checked now, not in the middle of a run
    info->configure(scratch, values);
    steps_.push_back(
        Step{nullptr, [info, values](Module &module) { info->configure(module, values); }});
  }
  for (const std::string &pass : info->passes)
    add(pass);
}

std::vector<const PassInfo *> PassManager::passes() const {
  std::vector<const PassInfo *> passes;
  for (const Step &step : steps_)
    if (step.pass)
      passes.push_back(step.pass);
  return passes;
}

void PassManager::run(Module &module) const {
  std::ostream &dump = options_.dumpStream ? *options_.dumpStream : std::cerr;
  bool dumpAll = options_.dumpAfter.count("all") != 0;
  for (const Step &step : steps_) {
    if (!step.pass) {
      step.configure(module);
      continue;
    }
    const PassInfo *pass = step.pass;
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
