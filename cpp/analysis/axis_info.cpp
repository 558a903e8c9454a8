// AxisInfo analysis: one forward walk over a func computing contiguity, divisibility and
// constancy per value (see axis_info.h; the per-op rules are in axis_info_rules.cpp). Loops
// iterate their body until the loop-carried facts stop shrinking. Also: the vector width of
// an access (for codegen) and the test_print_axis_info pass (for text tests).
#include "analysis/axis_info.h"

#include "ir/pass_manager.h"
#include "layout/linear_layout.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace tessera::analysis {

using namespace ir;
using namespace detail;

namespace detail {

int64_t highestPowerOfTwoDivisor(int64_t value) {
  if (value == 0)
    return kMaxDivisibility;
  uint64_t bits = static_cast<uint64_t>(value);
  uint64_t lowest = bits & (~bits + 1);
  return lowest >= static_cast<uint64_t>(kMaxDivisibility) ? kMaxDivisibility
                                                           : static_cast<int64_t>(lowest);
}

std::vector<int64_t> shapeOf(const Value *value) {
  return value->type().isTensor() ? value->type().shape() : std::vector<int64_t>{1};
}

int64_t pointeeBytes(const Type &pointerType) {
  return std::max(1, pointerType.elementType().pointee().bitWidth() / 8);
}

} // namespace detail

// ---------------------------------------------------------------- AxisInfo

AxisInfo AxisInfo::unknown(int rank) {
  AxisInfo info;
  info.contiguity.assign(rank, 1);
  info.divisibility.assign(rank, 1);
  info.constancy.assign(rank, 1);
  return info;
}

int64_t AxisInfo::divisibilityAt(int dim, int64_t runLength) const {
  // A shorter run starts at a multiple of runLength inside a contiguity run: the run's first
  // value plus a multiple of runLength.
  if (runLength < contiguity[dim])
    return std::min(divisibility[dim], runLength);
  return divisibility[dim];
}

bool AxisInfo::operator==(const AxisInfo &other) const {
  return contiguity == other.contiguity && divisibility == other.divisibility &&
         constancy == other.constancy && constantValue == other.constantValue;
}

std::string AxisInfo::str() const {
  std::ostringstream os;
  auto list = [&](const char *name, const std::vector<int64_t> &values) {
    os << name << " = [";
    for (size_t i = 0; i < values.size(); ++i)
      os << (i ? ", " : "") << values[i];
    os << "]";
  };
  list("contiguity", contiguity);
  os << ", ";
  list("divisibility", divisibility);
  os << ", ";
  list("constancy", constancy);
  if (constantValue)
    os << ", constant = " << *constantValue;
  return os.str();
}

AxisInfo join(const AxisInfo &a, const AxisInfo &b) {
  AxisInfo info = AxisInfo::unknown(a.rank());
  for (int d = 0; d < a.rank(); ++d) {
    int64_t contiguity = std::min(a.contiguity[d], b.contiguity[d]);
    info.contiguity[d] = contiguity;
    info.divisibility[d] =
        std::min(a.divisibilityAt(d, contiguity), b.divisibilityAt(d, contiguity));
    info.constancy[d] = std::min(a.constancy[d], b.constancy[d]);
  }
  if (a.constantValue == b.constantValue)
    info.constantValue = a.constantValue;
  return info;
}

// ---------------------------------------------------------------- AxisInfoAnalysis

AxisInfoAnalysis::AxisInfoAnalysis(Operation *func) {
  Block &body = func->body();
  std::vector<int64_t> hints;
  if (func->hasAttr("divisibility"))
    hints = func->arrayAttr("divisibility");
  for (unsigned i = 0; i < body.numArguments(); ++i) {
    Value *argument = body.argument(i);
    AxisInfo info = AxisInfo::unknown(static_cast<int>(shapeOf(argument).size()));
    if (!argument->type().isTensor() && i < hints.size() && hints[i] > 0)
      info.divisibility[0] = highestPowerOfTwoDivisor(hints[i]);
    set(argument, info);
  }
  visitBlock(body);
}

const AxisInfo &AxisInfoAnalysis::get(Value *value) const {
  auto it = infos_.find(value);
  if (it != infos_.end())
    return it->second;
  // Values created after the analysis ran: nothing known.
  static const std::vector<AxisInfo> unknownByRank = [] {
    std::vector<AxisInfo> infos;
    for (int rank = 0; rank <= 8; ++rank)
      infos.push_back(AxisInfo::unknown(rank));
    return infos;
  }();
  return unknownByRank.at(shapeOf(value).size());
}

std::vector<AxisInfo> AxisInfoAnalysis::infosOf(const std::vector<Value *> &values,
                                                size_t first) const {
  std::vector<AxisInfo> infos;
  for (size_t i = first; i < values.size(); ++i)
    infos.push_back(get(values[i]));
  return infos;
}

void AxisInfoAnalysis::visitBlock(Block &block) {
  for (auto &op : block.operations())
    visitOp(*op);
}

// tl.multiple_of / max_contiguous / max_constancy put their values (one per dim) on the op
// defining the hinted value; as in Triton they replace what the rules derived: the programmer
// knows facts (e.g. about an argument's runtime values) that no rule can prove.
static AxisInfo withHints(const Operation &op, AxisInfo info) {
  static const std::pair<const char *, std::vector<int64_t> AxisInfo::*> hints[] = {
      {"multiple_of", &AxisInfo::divisibility},
      {"max_contiguous", &AxisInfo::contiguity},
      {"max_constancy", &AxisInfo::constancy}};
  for (const auto &[key, field] : hints) {
    if (!op.hasAttr(key))
      continue;
    const std::vector<int64_t> &values = op.arrayAttr(key);
    if (values.size() == static_cast<size_t>(info.rank()))
      info.*field = values;
  }
  return info;
}

void AxisInfoAnalysis::visitOp(Operation &op) {
  switch (op.code()) {
  case OpCode::For: return visitFor(op);
  case OpCode::While: return visitWhile(op);
  case OpCode::If: return visitIf(op);
  default: break;
  }
  for (auto &region : op.regions()) // ops with regions this analysis has no rule for
    visitBlock(region->front());
  if (op.numResults() == 1) {
    std::vector<const AxisInfo *> operands;
    for (Value *operand : op.operands())
      operands.push_back(&get(operand));
    set(op.result(), withHints(op, detail::transfer(op, operands)));
  } else
    for (auto &result : op.results())
      set(result.get(), AxisInfo::unknown(static_cast<int>(shapeOf(result.get()).size())));
}

// Loop-carried facts start from the inits and shrink (join with what the body yields) until
// the body yields nothing new. Facts only shrink, over a finite lattice, so this ends.
void AxisInfoAnalysis::visitFor(Operation &op) {
  const AxisInfo &lowerBound = get(op.operand(0)), &step = get(op.operand(2));
  AxisInfo inductionVariable = AxisInfo::unknown(1); // lb + k * step
  inductionVariable.divisibility[0] =
      std::min(lowerBound.divisibilityAt(0, 1), step.divisibilityAt(0, 1));
  Block &body = op.body();
  std::vector<AxisInfo> carried = infosOf(op.operands(), 3);
  while (true) {
    set(body.argument(0), inductionVariable);
    for (size_t i = 0; i < carried.size(); ++i)
      set(body.argument(i + 1), carried[i]);
    visitBlock(body);
    std::vector<AxisInfo> yielded = infosOf(body.terminator()->operands(), 0), next;
    for (size_t i = 0; i < carried.size(); ++i)
      next.push_back(join(carried[i], yielded[i]));
    if (next == carried)
      break;
    carried = std::move(next);
  }
  for (size_t i = 0; i < carried.size(); ++i)
    set(op.result(i), carried[i]);
}

void AxisInfoAnalysis::visitWhile(Operation &op) {
  Block &before = op.body(0), &after = op.body(1);
  std::vector<AxisInfo> carried = infosOf(op.operands(), 0);
  while (true) {
    for (size_t i = 0; i < carried.size(); ++i)
      set(before.argument(i), carried[i]);
    visitBlock(before);
    std::vector<AxisInfo> passed = infosOf(before.terminator()->operands(), 1);
    for (size_t i = 0; i < passed.size(); ++i)
      set(after.argument(i), passed[i]);
    visitBlock(after);
    std::vector<AxisInfo> yielded = infosOf(after.terminator()->operands(), 0), next;
    for (size_t i = 0; i < carried.size(); ++i)
      next.push_back(join(carried[i], yielded[i]));
    if (next == carried)
      break;
    carried = std::move(next);
  }
  std::vector<AxisInfo> results = infosOf(before.terminator()->operands(), 1);
  for (size_t i = 0; i < results.size(); ++i)
    set(op.result(i), results[i]);
}

void AxisInfoAnalysis::visitIf(Operation &op) {
  visitBlock(op.body(0));
  visitBlock(op.body(1));
  std::vector<AxisInfo> thenInfos = infosOf(op.body(0).terminator()->operands(), 0),
                        elseInfos = infosOf(op.body(1).terminator()->operands(), 0);
  for (unsigned i = 0; i < op.numResults(); ++i)
    set(op.result(i), join(thenInfos[i], elseInfos[i]));
}

int64_t AxisInfoAnalysis::pointerAlignment(Value *pointers, int dim) const {
  if (!pointers->type().isTensor())
    return 1;
  const AxisInfo &info = get(pointers);
  int64_t elementsAligned =
      std::max<int64_t>(1, info.divisibility[dim] / pointeeBytes(pointers->type()));
  return std::min(info.contiguity[dim], elementsAligned);
}

int64_t AxisInfoAnalysis::maskAlignment(Value *mask, int dim) const {
  if (!mask->type().isTensor())
    return 1;
  return std::max<int64_t>(1, get(mask).constancy[dim]);
}

std::vector<int> orderByContiguity(const AxisInfo &info) {
  std::vector<int> order;
  for (int d = info.rank() - 1; d >= 0; --d)
    order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return info.contiguity[a] > info.contiguity[b]; });
  return order;
}

int accessVectorWidth(const AxisInfoAnalysis &analysis, const Operation &memoryOp) {
  Value *pointers = memoryOp.operand(0);
  const Type &type = pointers->type();
  if (!type.isTensor() || !type.encoding())
    return 1;
  LinearLayout layout = type.encoding()->toLinearLayout(type.shape());
  // The dim that a thread's consecutive registers step along (its first register basis).
  int dim = -1;
  if (layout.getInDimSize(kRegisterDim) > 1) {
    const LinearLayout::BasisVector &basis = layout.getBasis(kRegisterDim, 0);
    for (size_t d = 0; d < basis.size(); ++d)
      if (basis[d] != 0)
        dim = static_cast<int>(d);
  }
  if (dim < 0)
    return 1;
  int64_t width =
      std::min<int64_t>(layout.getNumConsecutiveInOut(), analysis.pointerAlignment(pointers, dim));
  width = std::min<int64_t>(width, std::max<int64_t>(1, 16 / pointeeBytes(type)));
  unsigned maskIndex = memoryOp.code() == OpCode::Load ? 1 : 2;
  if (memoryOp.numOperands() > maskIndex)
    width = std::min(width, analysis.maskAlignment(memoryOp.operand(maskIndex), dim));
  return static_cast<int>(width);
}

// ---------------------------------------------------------------- test_print_axis_info

namespace {

/// Test-only pass: writes each op result's AxisInfo as attributes (contiguity, divisibility,
/// constancy; a suffix _<i> for result i > 0) so that text tests can check the analysis.
void printAxisInfo(Module &module) {
  for (Operation *func : module.functions()) {
    AxisInfoAnalysis analysis(func);
    func->walk([&](Operation *op) {
      for (unsigned i = 0; i < op->numResults() && op != func; ++i) {
        std::string suffix = i ? "_" + std::to_string(i) : "";
        const AxisInfo &info = analysis.get(op->result(i));
        op->setAttr("contiguity" + suffix, info.contiguity);
        op->setAttr("divisibility" + suffix, info.divisibility);
        op->setAttr("constancy" + suffix, info.constancy);
      }
    });
  }
}

} // namespace

TESSERA_REGISTER_PASS(test_print_axis_info, "test_print_axis_info",
                      "Test only: annotate every op result with its AxisInfo", printAxisInfo);

} // namespace tessera::analysis
