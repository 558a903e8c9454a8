// A reference interpreter of integer tile IR for tests: evaluates every value of a func
// (straight-line code and `for` loops) on concrete arguments, ignoring layouts. The axis info
// tests check the analysis' claims against it; the layout pass tests check that the passes
// keep what a kernel stores.
#pragma once

#include "ir/ir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tessera::testing {

using namespace tessera::ir;
using V = std::vector<int64_t>;

/// A concrete value: row-major data; scalars have shape [1]. Pointers are byte addresses.
struct Concrete {
  V shape, data;
};

class Interpreter {
public:
  /// Evaluates the func for argument values `arguments` and program id `pid`, calling
  /// `check(value, concrete)` for every op result and block argument (each loop iteration).
  /// Stores land in `stores` (address -> value); memory reads a hash of the address.
  template <typename Check>
  void run(Operation *func, const V &arguments, int64_t pid, Check check) {
    pid_ = pid;
    for (unsigned i = 0; i < func->body().numArguments(); ++i)
      values_[func->body().argument(i)] = {{1}, {arguments[i]}};
    runBlock(func->body(), check);
  }

private:
  template <typename Check> void runBlock(Block &block, Check &check) {
    for (auto &op : block.operations()) {
      if (op->code() == OpCode::For) {
        runFor(*op, check);
        continue;
      }
      if (op->code() == OpCode::Store)
        store(*op);
      if (op->numResults() != 1)
        continue;
      values_[op->result()] = evaluate(*op);
      check(op->result(), values_[op->result()]);
    }
  }

  template <typename Check> void runFor(Operation &op, Check &check) {
    Block &body = op.body();
    std::vector<Concrete> carried;
    for (unsigned i = 3; i < op.numOperands(); ++i)
      carried.push_back(values_.at(op.operand(i)));
    int64_t lb = scalar(op.operand(0)), ub = scalar(op.operand(1)), step = scalar(op.operand(2));
    for (int64_t iv = lb; iv < ub; iv += step) {
      values_[body.argument(0)] = {{1}, {iv}};
      for (size_t i = 0; i < carried.size(); ++i) {
        values_[body.argument(i + 1)] = carried[i];
        check(body.argument(i + 1), carried[i]);
      }
      runBlock(body, check);
      for (size_t i = 0; i < carried.size(); ++i)
        carried[i] = values_.at(body.terminator()->operand(i));
    }
    for (size_t i = 0; i < carried.size(); ++i) {
      values_[op.result(i)] = carried[i];
      check(op.result(i), carried[i]);
    }
  }

  int64_t scalar(Value *value) { return values_.at(value).data[0]; }

  void store(Operation &op) {
    const Concrete &addresses = values_.at(op.operand(0)), &data = values_.at(op.operand(1));
    for (size_t i = 0; i < addresses.data.size(); ++i)
      if (op.numOperands() < 3 || values_.at(op.operand(2)).data[i])
        stores[addresses.data[i]] = data.data[i];
  }

public:
  std::map<int64_t, int64_t> stores;

private:

  Concrete evaluate(Operation &op) {
    V shape = op.result()->type().isTensor() ? op.result()->type().shape() : V{1};
    int64_t size = 1;
    for (int64_t extent : shape)
      size *= extent;
    Concrete out{shape, V(size)};
    switch (op.code()) {
    case OpCode::Constant:
      std::fill(out.data.begin(), out.data.end(), op.intAttr("value"));
      return out;
    case OpCode::ProgramId:
      out.data[0] = pid_;
      return out;
    case OpCode::MakeRange:
      for (int64_t i = 0; i < size; ++i)
        out.data[i] = op.intAttr("start") + i;
      return out;
    case OpCode::Splat:
      std::fill(out.data.begin(), out.data.end(), scalar(op.operand(0)));
      return out;
    case OpCode::ConvertLayout: // layouts say where values live, not what they are
    case OpCode::ExtSI:          // values stay small: widening keeps them
    case OpCode::ExpandDims: {
      const Concrete &in = values_.at(op.operand(0));
      return {shape, in.data};
    }
    case OpCode::Broadcast: {
      const Concrete &in = values_.at(op.operand(0));
      for (int64_t flat = 0; flat < size; ++flat) {
        int64_t rest = flat, source = 0, stride = 1;
        for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
          int64_t index = rest % shape[d];
          rest /= shape[d];
          source += (in.shape[d] == 1 ? 0 : index) * stride;
          stride *= in.shape[d];
        }
        out.data[flat] = in.data[source];
      }
      return out;
    }
    case OpCode::Load: { // memory holds a hash of each address; masked-off lanes read 0
      const Concrete &addresses = values_.at(op.operand(0));
      for (int64_t i = 0; i < size; ++i) {
        bool enabled = op.numOperands() < 2 || values_.at(op.operand(1)).data[i];
        out.data[i] = enabled ? addresses.data[i] * 7919 % 10007 : 0;
      }
      return out;
    }
    default:
      break;
    }
    const Concrete &a = values_.at(op.operand(0));
    const Concrete &b = values_.at(op.operand(1));
    for (int64_t i = 0; i < size; ++i)
      out.data[i] = binary(op, a.data[i], b.data[i], op.numOperands() > 2
                                                          ? values_.at(op.operand(2)).data[i]
                                                          : 0);
    return out;
  }

  static int64_t binary(Operation &op, int64_t x, int64_t y, int64_t z) {
    switch (op.code()) {
    case OpCode::AddI: case OpCode::AddF: return x + y;
    case OpCode::SubI: return x - y;
    case OpCode::MulI: return x * y;
    case OpCode::DivSI: return x / y;
    case OpCode::RemSI: return x % y;
    case OpCode::AndI: return x & y;
    case OpCode::OrI: return x | y;
    case OpCode::XOrI: return x ^ y;
    case OpCode::ShLI: return x << y;
    case OpCode::ShRSI: return x >> y;
    case OpCode::MaxSI: return std::max(x, y);
    case OpCode::MinSI: return std::min(x, y);
    case OpCode::Select: return x ? y : z;
    case OpCode::AddPtr:
      return x + y * (op.operand(0)->type().elementType().pointee().bitWidth() / 8);
    case OpCode::CmpI: {
      const std::string &p = op.stringAttr("predicate");
      if (p == "eq") return x == y;
      if (p == "ne") return x != y;
      if (p == "slt" || p == "ult") return x < y;
      if (p == "sle" || p == "ule") return x <= y;
      if (p == "sgt" || p == "ugt") return x > y;
      return x >= y;
    }
    default:
      ADD_FAILURE() << "interpreter has no rule for " << op.name();
      return 0;
    }
  }

  std::map<Value *, Concrete> values_;
  int64_t pid_ = 0;
};

} // namespace tessera::testing
