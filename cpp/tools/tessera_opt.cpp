// tessera-opt: parses tile IR text, runs named passes and pipelines in command-line order,
// prints the result. It drives the text tests (tests/lit): `tessera-opt %s --canonicalize |
// FileCheck %s`. A .ll input is LLVM IR instead, for Tessera's passes over LLVM IR
// (`tessera-opt k.ll --sink_predicates`).
// Errors go to stderr as "file:line:col: error: message" with exit code 1.
#include "codegen/codegen.h"
#include "ir/diagnostics.h"
#include "ir/parser.h"
#include "ir/pass_manager.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace tessera::ir;

namespace {

const char *kUsage =
    "usage: tessera-opt [file|-] [--<pass-name> ...] [options]\n"
    "  --<pass-name>             run a registered pass (see --list-passes); in order given\n"
    "  --pass-pipeline=a,b,c     run these passes and named pipelines, in this order; a\n"
    "                            pipeline takes options: tgir{num_stages=3 arch=sm_80}\n"
    "  --dump-after=name|all     print the IR to stderr after the named pass (repeatable)\n"
    "  --no-verify               do not verify after parsing and after each pass\n"
    "  --print-locations         print loc(\"file:line:col\") after ops that carry one\n"
    "  --split-input-file        treat each '// -----'-separated chunk as its own module\n"
    "  --list-passes             list the registered passes and pipelines and exit\n"
    "  --emit=llvm|llvm-unopt|ptx  after the passes, print the kernel's optimized LLVM IR, its\n"
    "                            LLVM IR as lowered, or its PTX instead of the tile IR (codegen)\n"
    "  --arch=sm_90a             target of --emit (sm_80, sm_90a, ...)\n"
    "  --libdevice=PATH          libdevice.10.bc for --emit (default: the CUDA install's)\n"
    "A file ending in .ll is LLVM IR: only the LLVM IR passes (--list-passes) run on it.\n";

/// One step of the command line's pass list: a pass, or a pipeline with its options.
struct Step {
  std::string name;
  bool pipeline = false;
  PipelineOptionValues values;
};

struct Options {
  std::string input = "-";
  std::vector<Step> steps;
  std::vector<std::string> llvmPasses; // passes over LLVM IR (a .ll input)
  std::set<std::string> dumpAfter;
  bool verify = true;
  bool printLocations = false;
  bool splitInputFile = false;
  std::string emit; // "", "llvm", "llvm-unopt" or "ptx"
  std::string arch = "sm_90a";
  std::string libdevice;
};

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty())
      items.push_back(item);
  return items;
}

/// Splits at the commas outside braces: "a,tgir{x=1 y=2},b" -> a, tgir{x=1 y=2}, b.
std::vector<std::string> splitPipelineList(const std::string &text) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : text) {
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (c == ',' && depth == 0)
      items.emplace_back();
    else
      items.back() += c;
  }
  items.erase(std::remove(items.begin(), items.end(), std::string()), items.end());
  return items;
}

bool isLLVMPass(const std::string &name) {
  for (const tessera::codegen::LLVMPassInfo &pass : tessera::codegen::llvmPasses())
    if (pass.name == name)
      return true;
  return false;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void listPasses() {
  auto line = [](const std::string &flag, const std::string &description) {
    std::string padded = flag;
    padded.resize(std::max<size_t>(padded.size() + 2, 26), ' ');
    std::cout << "  " << padded << description << "\n";
  };
  std::cout << "Passes (tile IR):\n";
  for (const PassInfo *pass : registeredPasses())
    line("--" + pass->name, pass->description);
  std::cout << "Pipelines (--pass-pipeline=name or name{option=value ...}):\n";
  for (const PipelineInfo *pipeline : registeredPipelines()) {
    line(pipeline->name, pipeline->description);
    std::string passes;
    for (const std::string &pass : pipeline->passes)
      passes += (passes.empty() ? "" : ",") + pass;
    std::cout << "      passes: " << passes << "\n";
    for (const PipelineOption &option : pipeline->options)
      std::cout << "      " << option.name << ": " << option.description << "\n";
  }
  std::cout << "Passes (LLVM IR, a .ll input):\n";
  for (const tessera::codegen::LLVMPassInfo &pass : tessera::codegen::llvmPasses())
    line("--" + pass.name, pass.description);
}

/// Parses the command line; returns false (after printing why) when the tool should stop.
bool parseArguments(int argc, char **argv, Options &options, int &exitCode) {
  bool sawInput = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const std::string &prefix) { return arg.substr(prefix.size()); };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      exitCode = 0;
      return false;
    } else if (arg == "--list-passes") {
      listPasses();
      exitCode = 0;
      return false;
    } else if (arg.rfind("--pass-pipeline=", 0) == 0) {
      for (const std::string &item : splitPipelineList(value("--pass-pipeline="))) {
        if (lookupPass(item)) {
          options.steps.push_back(Step{item, false, {}});
          continue;
        }
        try {
          auto [pipeline, values] = parsePipelineSpec(item);
          PassManager().addPipeline(pipeline->name, values); // checks the option names
          options.steps.push_back(Step{pipeline->name, true, values});
        } catch (const std::invalid_argument &error) {
          if (item.find('{') == std::string::npos)
            std::cerr << "tessera-opt: error: unknown pass or pipeline '" << item << "'\n";
          else
            std::cerr << "tessera-opt: error: " << error.what() << "\n";
          exitCode = 1;
          return false;
        }
      }
    } else if (arg.rfind("--dump-after=", 0) == 0) {
      for (const std::string &name : splitList(value("--dump-after=")))
        options.dumpAfter.insert(name);
    } else if (arg.rfind("--emit=", 0) == 0) {
      options.emit = value("--emit=");
      if (options.emit != "llvm" && options.emit != "llvm-unopt" && options.emit != "ptx") {
        std::cerr << "tessera-opt: error: --emit takes llvm, llvm-unopt or ptx\n";
        exitCode = 1;
        return false;
      }
    } else if (arg.rfind("--arch=", 0) == 0) {
      options.arch = value("--arch=");
    } else if (arg.rfind("--libdevice=", 0) == 0) {
      options.libdevice = value("--libdevice=");
    } else if (arg == "--no-verify") {
      options.verify = false;
    } else if (arg == "--print-locations") {
      options.printLocations = true;
    } else if (arg == "--split-input-file") {
      options.splitInputFile = true;
    } else if (arg.rfind("--", 0) == 0 && lookupPass(value("--"))) {
      options.steps.push_back(Step{value("--"), false, {}});
    } else if (arg.rfind("--", 0) == 0 && isLLVMPass(value("--"))) {
      options.llvmPasses.push_back(value("--"));
    } else if (arg.rfind("-", 0) == 0 && arg != "-") {
      std::cerr << "tessera-opt: error: unknown option or pass '" << arg
                << "' (see --help and --list-passes)\n";
      exitCode = 1;
      return false;
    } else if (sawInput) {
      std::cerr << "tessera-opt: error: more than one input file\n";
      exitCode = 1;
      return false;
    } else {
      options.input = arg;
      sawInput = true;
    }
  }
  for (const std::string &name : options.dumpAfter)
    if (name != "all" && !lookupPass(name)) {
      std::cerr << "tessera-opt: error: unknown pass '" << name << "'\n";
      exitCode = 1;
      return false;
    }
  bool llvmInput = endsWith(options.input, ".ll");
  if (!llvmInput && !options.llvmPasses.empty()) {
    std::cerr << "tessera-opt: error: --" << options.llvmPasses.front()
              << " is a pass over LLVM IR: give it a .ll file\n";
    exitCode = 1;
    return false;
  }
  if (llvmInput && (!options.steps.empty() || !options.emit.empty())) {
    std::cerr << "tessera-opt: error: a .ll input is LLVM IR: only LLVM IR passes run on it\n";
    exitCode = 1;
    return false;
  }
  return true;
}

bool readInput(const std::string &path, std::string &text) {
  std::stringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream file(path);
    if (!file)
      return false;
    buffer << file.rdbuf();
  }
  text = buffer.str();
  return true;
}

/// Chunks separated by `// -----` lines. Each chunk keeps the preceding lines as blank lines,
/// so that line numbers in errors stay those of the whole file.
std::vector<std::string> splitChunks(const std::string &text) {
  std::vector<std::string> chunks(1);
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (line.rfind("// -----", 0) == 0) {
      size_t linesSoFar = std::count(chunks.back().begin(), chunks.back().end(), '\n') + 1;
      chunks.push_back(std::string(linesSoFar, '\n'));
      continue;
    }
    chunks.back() += line + "\n";
  }
  return chunks;
}

/// Parses, verifies, transforms and prints one module; reports errors to stderr.
bool processModule(const std::string &text, const std::string &fileName, const Options &options) {
  try {
    ParserOptions parserOptions;
    parserOptions.fileName = fileName;
    parserOptions.locateOps = true;
    std::unique_ptr<Module> module = parseModuleWithOptions(text, parserOptions);
    if (options.verify)
      verify(*module);
    PassManagerOptions managerOptions;
    managerOptions.verifyEach = options.verify;
    managerOptions.dumpAfter = options.dumpAfter;
    PassManager manager(managerOptions);
    for (const Step &step : options.steps) {
      if (step.pipeline)
        manager.addPipeline(step.name, step.values);
      else
        manager.add(step.name);
    }
    manager.run(*module);
    if (!options.emit.empty()) {
      tessera::codegen::CodegenOptions codegenOptions;
      codegenOptions.arch = options.arch;
      codegenOptions.libdevicePath = options.libdevice;
      tessera::codegen::CodegenResult result = tessera::codegen::generate(*module, codegenOptions);
      std::cout << (options.emit == "ptx"          ? result.ptx
                    : options.emit == "llvm-unopt" ? result.unoptimizedLLVMIR
                                                   : result.llvmIR);
      return true;
    }
    PrintOptions printOptions;
    printOptions.locations = options.printLocations;
    print(*module, std::cout, printOptions);
    return true;
  } catch (const CompileError &error) {
    std::string where = error.location().empty() ? fileName : error.location();
    std::cerr << where << ": error: " << error.message() << "\n";
  } catch (const std::invalid_argument &error) { // a pipeline option's bad value
    std::cerr << fileName << ": error: " << error.what() << "\n";
  } catch (const std::exception &error) {
    std::cerr << fileName << ": error: internal error: " << error.what() << "\n";
  }
  return false;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  int exitCode = 0;
  if (!parseArguments(argc, argv, options, exitCode))
    return exitCode;
  std::string text;
  if (!readInput(options.input, text)) {
    std::cerr << "tessera-opt: error: cannot read '" << options.input << "'\n";
    return 1;
  }
  std::string fileName = options.input == "-" ? "<stdin>" : options.input;
  if (endsWith(options.input, ".ll")) {
    try {
      std::cout << tessera::codegen::runLLVMPasses(text, options.llvmPasses, fileName);
      return 0;
    } catch (const CompileError &error) {
      std::string where = error.location().empty() ? fileName : error.location();
      std::cerr << where << ": error: " << error.message() << "\n";
      return 1;
    }
  }
  if (!options.splitInputFile)
    return processModule(text, fileName, options) ? 0 : 1;
  bool allSucceeded = true;
  std::vector<std::string> chunks = splitChunks(text);
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i)
      std::cout << "// -----\n";
    allSucceeded &= processModule(chunks[i], fileName, options);
  }
  return allSucceeded ? 0 : 1;
}
