// Tessera's own passes over LLVM IR, by name, run on LLVM IR text: how tessera-opt runs one
// of them alone on a .ll file (tests/lit/codegen/sink_predicates.ll). The codegen pipeline
// does not go through here: it calls each of them itself, in its place (sink_predicates after
// O3, and sink_increments with carried_addresses: nvptx_target.cpp, optimizeModule).
#include "codegen/codegen.h"
#include "codegen/nvptx_target.h"

#include "ir/diagnostics.h"

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>

namespace tessera::codegen {

namespace {

struct LLVMPass {
  LLVMPassInfo info;
  std::function<void(llvm::Function &)> run;
};

const std::vector<LLVMPass> &passTable() {
  static const std::vector<LLVMPass> passes = {
      {{"sink_predicates", "recompute i1 compares (and their and/or/xor) past the loops they "
                           "would stay live across (LLVM IR, after O3)"},
       sinkPredicatesPastLoops},
      {{"sink_increments", "move each increment of a loop-carried pointer past the pointer's "
                           "last use in its block (LLVM IR, after O3)"},
       sinkPointerIncrements},
  };
  return passes;
}

} // namespace

std::vector<LLVMPassInfo> llvmPasses() {
  std::vector<LLVMPassInfo> infos;
  for (const LLVMPass &pass : passTable())
    infos.push_back(pass.info);
  return infos;
}

std::string runLLVMPasses(const std::string &llvmIR, const std::vector<std::string> &names,
                          const std::string &fileName) {
  std::vector<const LLVMPass *> selected;
  for (const std::string &name : names) {
    const LLVMPass *found = nullptr;
    for (const LLVMPass &pass : passTable())
      if (pass.info.name == name)
        found = &pass;
    if (!found)
      throw ir::CompileError("unknown LLVM IR pass '" + name + "'");
    selected.push_back(found);
  }
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(llvmIR, diagnostic, context);
  if (!module)
    throw ir::CompileError(diagnostic.getMessage().str(),
                           fileName + ":" + std::to_string(diagnostic.getLineNo()) + ":" +
                               std::to_string(diagnostic.getColumnNo() + 1));
  for (const LLVMPass *pass : selected)
    for (llvm::Function &function : *module)
      pass->run(function);
  std::string text;
  llvm::raw_string_ostream stream(text);
  if (llvm::verifyModule(*module, &stream))
    throw ir::CompileError("invalid LLVM IR after the passes: " + text);
  module->print(stream, nullptr);
  return text;
}

} // namespace tessera::codegen
