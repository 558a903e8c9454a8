// widen_offsets: the integer arithmetic of pointer offsets recomputed in i64 for the pointers
// into tensors of 2**31 elements or more (the func attribute `large_tensors`, argument indices,
// set by the front end from the launch's specialization; absent, the pass changes nothing).
//
//   %r = muli %row, %stride : (i32, i32) -> i32
//   %p = addptr %a, %r : (ptr<f16>, i32) -> ptr<f16>             // %a in large_tensors
// becomes
//   %r = muli %row, %stride : (i32, i32) -> i32                   // kept for its other users
//   %w = extsi %row : (i32) -> i64
//   %s = extsi %stride : (i32) -> i64
//   %r64 = muli %w, %s : (i64, i64) -> i64
//   %p = addptr %a, %r64 : (ptr<f16>, i64) -> ptr<f16>
//
// Why: Triton-style kernels compute offsets in int32 (program_id, arange and int arguments are
// i32), which wraps silently past 2**31 elements. Recomputing only the slice that feeds
// addresses (analysis/address_slice.h) keeps every value the kernel sees (masks, stored
// indices, dtypes) as written, and kernels specialized for smaller tensors keep their int32
// arithmetic and their code. The recomputed ops give exactly the i32 results, sign-extended,
// wherever the i32 arithmetic does not overflow, and the true offsets where it does. Leaves
// (program ids, aranges, arguments, loads, unsigned ops) are sign-extended, as addptr reads
// its offset; carried offsets of `for` loops get an i64 carried value beside the i32 one; a
// `while` loop's values are leaves. inttoptr's i64 operand is recomputed the same way.
#include "analysis/address_slice.h"
#include "ir/builder.h"
#include "ir/pass_manager.h"

#include <map>

namespace tessera::ir {

namespace {

using analysis::SliceStep;

Type wideType(const Type &type) { return type.withElement(Type::i64()); }

int widthOf(const Value *value) { return value->type().elementType().bitWidth(); }

bool isCarried(const Value *value) {
  Block *block = value->ownerBlock();
  Operation *parent = block ? block->parentOp() : nullptr;
  return parent && parent->code() == OpCode::For && value->index() > 0;
}

/// Whether widening the i32 `value` computes something other than its sign extension.
bool recomputable(const Value *value) {
  if (widthOf(value) != 32)
    return false;
  if (isCarried(value))
    return true;
  const Operation *def = value->definingOp();
  if (!def)
    return false;
  SliceStep step = analysis::sliceStep(*def);
  return step == SliceStep::Arithmetic || step == SliceStep::Shape || step == SliceStep::Select ||
         def->code() == OpCode::For || def->code() == OpCode::If;
}

/// Recomputes slice values in i64, each once (memoized); new ops sit right after the op that
/// defines the value they stand for, so they dominate wherever it does.
class Widener {
public:
  Value *widen(Value *value) {
    auto known = wide_.find(value);
    if (known != wide_.end())
      return known->second;
    Value *wide = widthOf(value) == 64 ? rebuildWide(value) : widenNarrow(value);
    wide_[value] = wide;
    return wide;
  }

private:
  Value *widenNarrow(Value *value) {
    Operation *def = value->definingOp();
    if (widthOf(value) == 32) {
      if (isCarried(value))
        return widenCarried(value->ownerBlock()->parentOp(), value->index() - 1);
      if (def && def->code() == OpCode::For) {
        widenCarried(def, value->index());
        return wide_.at(value);
      }
      if (def && def->code() == OpCode::If)
        return widenIfResult(def, value->index());
      if (def && analysis::sliceStep(*def) != SliceStep::Leaf &&
          analysis::sliceStep(*def) != SliceStep::Extend)
        return recompute(def, wideType(value->type()));
    }
    return signExtended(value);
  }

  /// An i64 value of the slice: rebuilt only where something it is computed from changed.
  Value *rebuildWide(Value *value) {
    Operation *def = value->definingOp();
    if (!def)
      return value;
    SliceStep step = analysis::sliceStep(*def);
    if (step == SliceStep::Extend)
      return recomputable(def->operand(0)) ? widen(def->operand(0)) : value;
    if (step != SliceStep::Arithmetic && step != SliceStep::Shape && step != SliceStep::Select)
      return value;
    bool changed = false;
    for (unsigned i = step == SliceStep::Select ? 1 : 0; i < def->numOperands(); ++i)
      changed |= widen(def->operand(i)) != def->operand(i);
    return changed ? recompute(def, value->type()) : value;
  }

  /// The op again on widened operands (a select's condition stays), with its attributes
  /// (tl.multiple_of hints included), producing `type`.
  Value *recompute(Operation *def, const Type &type) {
    std::vector<Value *> operands = def->operands();
    for (unsigned i = def->code() == OpCode::Select ? 1 : 0; i < operands.size(); ++i)
      operands[i] = widen(operands[i]);
    Builder builder;
    builder.setInsertionPointAfter(def);
    builder.setLocation(def->location());
    return builder.create(def->code(), operands, {type}, def->attributes())->result();
  }

  Value *signExtended(Value *value) {
    Builder builder;
    if (Operation *def = value->definingOp()) {
      builder.setInsertionPointAfter(def);
      builder.setLocation(def->location());
    } else {
      Block *block = value->ownerBlock();
      Operation *first = block->empty() ? nullptr : block->operations().front().get();
      builder = Builder(block, first);
      if (first)
        builder.setLocation(first->location());
    }
    return builder.create(OpCode::ExtSI, {value}, {wideType(value->type())})->result();
  }

  /// Carried value `carried` of `loop` gets an i64 twin: initial value, block argument,
  /// yielded value and result. The yield's slot is taken (by the argument itself) before its
  /// value is widened, because widening it may give other carried values of this loop twins.
  Value *widenCarried(Operation *loop, unsigned carried) {
    Block &body = loop->body();
    Value *argument = body.argument(carried + 1);
    Type type = wideType(argument->type());
    std::vector<Value *> operands = loop->operands();
    operands.push_back(widen(loop->operand(3 + carried)));
    loop->setOperands(operands);
    Value *wideArgument = body.addArgument(type);
    wide_[argument] = wideArgument;
    wide_[loop->result(carried)] = loop->addResult(type);
    Operation *yield = body.terminator();
    std::vector<Value *> yielded = yield->operands();
    unsigned slot = static_cast<unsigned>(yielded.size());
    yielded.push_back(wideArgument);
    yield->setOperands(yielded);
    yield->setOperand(slot, widen(yield->operand(carried)));
    return wideArgument;
  }

  Value *widenIfResult(Operation *branch, unsigned index) {
    Value *result = branch->result(index);
    for (unsigned region = 0; region < 2; ++region) {
      Operation *yield = branch->body(region).terminator();
      std::vector<Value *> yielded = yield->operands();
      yielded.push_back(widen(yield->operand(index)));
      yield->setOperands(yielded);
    }
    return branch->addResult(wideType(result->type()));
  }

  std::map<Value *, Value *> wide_;
};

/// Whether an addptr may address one of the `large` arguments (or memory of unknown origin).
bool addressesLarge(Operation &func, Operation &addptr, const std::set<int64_t> &large) {
  bool unknown = false;
  for (unsigned origin : analysis::pointerOrigins(func, addptr.operand(0), unknown))
    if (large.count(origin))
      return true;
  return unknown;
}

void runWidenOffsets(Module &module) {
  for (Operation *func : module.functions()) {
    if (!func->hasAttr("large_tensors") || func->arrayAttr("large_tensors").empty())
      continue;
    const std::vector<int64_t> &indices = func->arrayAttr("large_tensors");
    std::set<int64_t> large(indices.begin(), indices.end());
    Widener widener;
    for (const analysis::OffsetUse &use : analysis::offsetUses(*func)) {
      Value *offset = use.op->operand(use.operand);
      int width = widthOf(offset);
      if (use.op->code() == OpCode::IntToPtr) {
        if (width != 64) // inttoptr zero-extends a narrower integer: left as it is
          continue;
      } else if ((width != 32 && width != 64) || !addressesLarge(*func, *use.op, large)) {
        continue;
      }
      Value *wide = widener.widen(offset);
      if (wide != offset)
        use.op->setOperand(use.operand, wide);
    }
  }
}

} // namespace

TESSERA_REGISTER_PASS(widen_offsets, "widen_offsets",
                      "recompute pointer offsets in i64 for tensors of 2**31 elements or more "
                      "(func attribute large_tensors)",
                      runWidenOffsets);

} // namespace tessera::ir
