// Helpers for the codegen tests: build kernels with layouts through the Builder, generate
// PTX, and assemble it with ptxas (when installed) to read registers and spills.
#pragma once

#include "codegen/codegen.h"
#include "ir/builder.h"
#include "ir/diagnostics.h"
#include "ir/verifier.h"
#include "layout/blocked.h"
#include "layout/slice.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace tessera::codegen_test {

using ir::OpCode;
using ir::Type;
using ir::Value;

inline EncodingPtr blocked(std::vector<int> sizePerThread, std::vector<int> threadsPerWarp,
                           std::vector<int> warpsPerCTA, std::vector<int> order) {
  return std::make_shared<BlockedEncoding>(sizePerThread, threadsPerWarp, warpsPerCTA, order);
}

/// A kernel under construction: one func in its own module, the builder at its end.
class KernelBuilder {
public:
  KernelBuilder(const std::string &name, const std::vector<Type> &arguments,
                std::vector<int64_t> divisibility = {}, int numWarps = 4)
      : builder(&module.body()) {
    module.attributes()["num_warps"] = int64_t(numWarps);
    std::map<std::string, ir::Attribute> attrs = {{"sym_name", name}};
    if (!divisibility.empty())
      attrs["divisibility"] = divisibility;
    func = builder.create(OpCode::Func, {}, {}, attrs, 1);
    for (const Type &type : arguments)
      func->body().addArgument(type);
    builder.setInsertionPointToEnd(&func->body());
  }

  Value *arg(unsigned i) { return func->body().argument(i); }
  Value *op(OpCode code, const std::vector<Value *> &operands, Type result,
            std::map<std::string, ir::Attribute> attrs = {}) {
    return builder.create(code, operands, {result}, std::move(attrs))->result();
  }
  void effect(OpCode code, const std::vector<Value *> &operands) {
    builder.create(code, operands, {});
  }
  Value *constant(int64_t value, Type type) {
    return op(OpCode::Constant, {}, type, {{"value", value}});
  }
  Value *constantF(double value, Type type) {
    return op(OpCode::Constant, {}, type, {{"value", value}});
  }
  Value *range(int64_t start, int64_t end, EncodingPtr encoding) {
    return op(OpCode::MakeRange, {}, Type::tensor({end - start}, Type::i32(), encoding),
              {{"start", start}, {"end", end}});
  }
  Value *splat(Value *scalar, const Type &tensorType) {
    return op(OpCode::Splat, {scalar}, tensorType);
  }
  /// base + offsets, elementwise: a tensor of pointers in the offsets' layout.
  Value *at(Value *base, Value *offsets) {
    Type pointers = offsets->type().withElement(base->type());
    return op(OpCode::AddPtr, {splat(base, pointers), offsets}, pointers);
  }
  Value *load(Value *pointers) {
    return op(OpCode::Load, {pointers}, pointers->type().withElement(
                                            pointers->type().elementType().pointee()));
  }
  /// Finishes the body with `return` and verifies the module.
  ir::Module &finish() {
    builder.create(OpCode::Return, {}, {});
    ir::verify(module);
    return module;
  }

  ir::Module module;
  ir::Builder builder;
  ir::Operation *func;
};

inline bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

inline int countOf(const std::string &text, const std::string &what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++count;
  return count;
}

/// Counts the PTX instructions whose opcode starts with `prefix` (e.g. "ld.global") and whose
/// vector suffix is `vector` ("v2", "v4"; "" for scalar accesses), whatever their type suffix
/// (LLVM prints b32 where older versions printed f32).
inline int countInstructions(const std::string &ptx, const std::string &prefix,
                             const std::string &vector) {
  int count = 0;
  std::istringstream lines(ptx);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream tokens(line);
    std::string opcode;
    tokens >> opcode;
    if (!opcode.empty() && opcode[0] == '@') // predicate guard
      tokens >> opcode;
    if (opcode.rfind(prefix + ".", 0) != 0)
      continue;
    std::string found;
    for (const char *width : {".v2.", ".v4.", ".v8."})
      if (opcode.find(width) != std::string::npos)
        found = std::string(width).substr(1, 2);
    count += found == vector;
  }
  return count;
}

inline std::string ptxasPath() {
  const char *env = std::getenv("TESSERA_PTXAS");
  if (env && *env)
    return env;
  for (const char *candidate :
       {"/usr/local/bin/ptxas", "/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (access(candidate, X_OK) == 0)
      return candidate;
  return "";
}

struct PtxasReport {
  bool ok = false;
  std::string log;
  int registers = -1;
  int spillStores = -1;
  int spillLoads = -1;
};

/// Assembles `ptx` for `arch` with `ptxas -v` and parses the resource report.
inline PtxasReport runPtxas(const std::string &ptx, const std::string &arch) {
  PtxasReport report;
  char path[] = "/tmp/tessera-codegen-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return report;
  close(fd);
  std::string ptxPath = std::string(path) + ".ptx";
  std::rename(path, ptxPath.c_str());
  std::ofstream(ptxPath) << ptx;
  std::string command = ptxasPath() + " -v -arch=" + arch + " " + ptxPath + " -o " + ptxPath +
                        ".cubin 2>&1";
  FILE *pipe = popen(command.c_str(), "r");
  char buffer[512];
  while (pipe && fgets(buffer, sizeof buffer, pipe))
    report.log += buffer;
  report.ok = pipe && pclose(pipe) == 0;
  std::remove(ptxPath.c_str());
  std::remove((ptxPath + ".cubin").c_str());
  std::smatch match;
  if (std::regex_search(report.log, match, std::regex(R"(Used (\d+) registers)")))
    report.registers = std::stoi(match[1]);
  if (std::regex_search(report.log, match,
                        std::regex(R"((\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    report.spillStores = std::stoi(match[1]);
    report.spillLoads = std::stoi(match[2]);
  }
  return report;
}

} // namespace tessera::codegen_test
