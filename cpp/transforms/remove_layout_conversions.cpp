// remove_layout_conversions: the last layout pass (after assign_layouts, coalesce and
// accelerate_matmul). Drops convert_layout ops that do nothing, folds chains of them, and
// recomputes the cheap values feeding a conversion directly in the encoding it converts to
// (as the backward rematerialization of Triton's RemoveLayoutConversions), anchored at the
// loads, stores and dots whose layouts the earlier passes chose. A conversion that moves data
// between threads goes through shared memory with barriers; recomputing a splat or an add in
// the other layout costs a few instructions.
//
//   %o = addi %s, %r : (tensor<1024xi32, #B4>, tensor<1024xi32, #B4>) -> tensor<1024xi32, #B4>
//   %c = convert_layout %o : (tensor<1024xi32, #B4>) -> tensor<1024xi32, #B8>
// becomes (%s a splat, %r a make_range, both recomputed in #B8)
//   %s8 = splat %n : (i32) -> tensor<1024xi32, #B8>
//   %r8 = make_range {end = 1024, start = 0} : () -> tensor<1024xi32, #B8>
//   %c = addi %s8, %r8 : (tensor<1024xi32, #B8>, tensor<1024xi32, #B8>) -> tensor<1024xi32, #B8>
//
// Plan: first, the #mma layouts of dot results flow forward into the values computed from them
// (remove_layout_conversions_accumulators.cpp), then, repeated until nothing changes:
// 1. Fold: a conversion to the encoding its operand already has is the operand; one applied
//    to another conversion converts the original value.
// 2. For each conversion, last first: collect the backward slice of its operand that must be
//    recomputed in the target encoding. The walk stops at values already in that encoding
//    (or converted from it); it goes through pure ops that can produce any layout
//    (elementwise, broadcast, expand_dims, splat, make_range, constant; scan; reduce, into a
//    Slice along its axis) and through values a `for` carries (its init and yielded value);
//    anything else (a load, a reshape, a while argument) abandons the slice, leaving the
//    conversion, unless its value is at least 8 times smaller than the slice's root (a bias
//    row loaded before its broadcast): the slice then converts that value instead. A load of
//    fewer elements than the CTA has threads is recomputed too, outside register-heavy loops
//    (see smallLoad below). A closed slice is cloned in the new encoding, a carried value
//    becoming a new loop-carried value, and the conversion goes.
//    A dot's A operand that cannot be recomputed in its #dot_op layout tries the dot's #mma
//    layout (chained dots: the conversion out of #mma is then register-only); a truncf of a
//    conversion out of #mma is done before it (dot_layout_rules.h).
// 3. A value a `for` carries in one layout but computes each iteration from a conversion out
//    of another (an accumulator fed by a coalesced load) is carried in the other layout: the
//    conversion inside the loop becomes one of the init before it and one of the result after.
// 4. Erase the ops and loop-carried values that the rewrites left without users.
// 5. A reduce whose operands are converted out of one layout, by conversions that feed
//    nothing else (or are computed from scalars alone, as argmax's indices), reduces in that
//    layout instead: the conversion moves after it, onto the smaller reduced tensors (for a
//    rank-1 reduce, a scalar: it disappears); step 2 recomputes the indices in that layout.
#include "transforms/layout_passes.h"

#include "ir/pass_manager.h"
#include "layout/dot_operand.h"
#include "transforms/dot_layout_rules.h"
#include "transforms/passes.h"

#include <algorithm>
#include <map>
#include <set>

namespace tessera::transforms {

using namespace ir;

namespace {

/// A value needed in an encoding (by the encoding's text, which identifies it).
using Need = std::pair<Value *, std::string>;
Need needOf(Value *value, const EncodingPtr &encoding) { return {value, encoding->str()}; }

constexpr size_t kMaxSliceSize = 512;
/// Small loads are recomputed in loops that carry fewer 32-bit registers per thread than this
/// (attention's dK/dV loop at head dim 128 carries more: docs/perf/pass_decisions.md).
constexpr int64_t kMaxCarriedRegistersForLoads = 96;
/// A slice may end in a conversion of a value this many times smaller than its root.
constexpr int64_t kBoundaryRatio = 8;

/// 32-bit registers per thread that the `for` loops around `op` carry (tensors spread over
/// `numThreads`, scalars one each), the most of any of them.
int64_t carriedRegistersAround(const Operation *op, int numThreads) {
  int64_t most = 0;
  for (Operation *loop = op->parentOp(); loop; loop = loop->parentOp()) {
    if (loop->code() != OpCode::For)
      continue;
    int64_t bits = 0;
    const Block &body = loop->body();
    for (unsigned i = 1; i < body.numArguments(); ++i) {
      const Type &type = body.argument(i)->type();
      bits += type.isTensor() ? type.numElements() * type.bitWidth() / std::max(numThreads, 1)
                              : std::max(32, type.bitWidth());
    }
    most = std::max(most, bits / 32);
  }
  return most;
}

std::vector<Operation *> opsInOrder(Operation *func) {
  std::vector<Operation *> ops;
  func->walk([&](Operation *op) {
    if (op != func)
      ops.push_back(op);
  });
  return ops;
}

// Plan step 1.
bool foldConversions(Operation *func) {
  bool changed = false;
  for (Operation *op : opsInOrder(func)) {
    if (op->code() != OpCode::ConvertLayout)
      continue;
    while (Operation *def = op->operand(0)->definingOp()) {
      if (def->code() != OpCode::ConvertLayout)
        break;
      op->setOperand(0, def->operand(0));
      changed = true;
    }
    if (sameEncoding(op->operand(0)->type().encoding(), op->result()->type().encoding())) {
      op->result()->replaceAllUsesWith(op->operand(0));
      op->erase();
      changed = true;
    }
  }
  return changed;
}

/// Plan step 2 for one conversion. `cache` holds values already recomputed in this round.
class Rematerialization {
public:
  Rematerialization(std::map<Need, Value *> &cache, int numThreads)
      : cache_(cache), numThreads_(numThreads) {}

  bool collect(Value *root, const EncodingPtr &target) {
    int64_t rootElements = root->type().numElements();
    std::vector<std::pair<Value *, EncodingPtr>> worklist{{root, target}};
    std::set<Need> visited;
    while (!worklist.empty()) {
      auto [value, encoding] = worklist.back();
      worklist.pop_back();
      Need need = needOf(value, encoding);
      if (!visited.insert(need).second || ready_.count(need))
        continue;
      if (visited.size() > kMaxSliceSize)
        return false;
      if (sameEncoding(value->type().encoding(), encoding)) {
        ready_[need] = value;
        continue;
      }
      if (auto it = cache_.find(need); it != cache_.end()) {
        ready_[need] = it->second;
        continue;
      }
      if (Operation *def = value->definingOp()) {
        if (def->code() == OpCode::ConvertLayout) { // look through it
          alias_[need] = needOf(def->operand(0), encoding);
          worklist.emplace_back(def->operand(0), encoding);
          continue;
        }
        // A load of fewer elements than the CTA has threads is recomputed (as Triton's
        // isExpensiveLoadOrStore): not every thread loads anyway, so the target layout costs
        // no coalescing and saves the trip through shared memory. Not in a loop that already
        // carries many registers: a global load is issued early, so its values live longer
        // than those of a conversion read just before use (docs/perf/pass_decisions.md).
        bool smallLoad = def->code() == OpCode::Load && isSideEffectFree(*def) && // not volatile
                         value->type().numElements() < numThreads_ &&
                         carriedRegistersAround(def, numThreads_) < kMaxCarriedRegistersForLoads;
        if (!canProduceLayout(*def, encoding) || (!def->hasTrait(trait::PURE) && !smallLoad)) {
          // A much smaller value (a bias row before its broadcast) is converted instead.
          if (value->type().numElements() * kBoundaryRatio > rootElements)
            return false;
          boundaries_[value].push_back(encoding);
          continue;
        }
        std::vector<EncodingPtr> &encodings = clones_[def]; // once per op (reduce: results)
        if (std::none_of(encodings.begin(), encodings.end(),
                         [&](const EncodingPtr &e) { return sameEncoding(e, encoding); }))
          encodings.push_back(encoding);
        for (unsigned i = 0; i < def->numOperands(); ++i)
          if (EncodingPtr operandLayout = operandEncoding(*def, i, encoding))
            worklist.emplace_back(def->operand(i), operandLayout);
        continue;
      }
      Operation *loop = value->ownerBlock()->parentOp();
      if (!loop || loop->code() != OpCode::For || value->index() == 0)
        return false;
      unsigned carried = value->index() - 1;
      newCarried_[loop].push_back({carried, encoding});
      worklist.emplace_back(loop->operand(3 + carried), encoding);
      worklist.emplace_back(loop->body().terminator()->operand(carried), encoding);
    }
    return true;
  }

  /// Makes the slice use `replacement` wherever it needs `value` in `encoding` (set before
  /// collect; the replacement may be filled in later, before rewrite).
  void assume(Value *value, const EncodingPtr &encoding, Value *replacement) {
    ready_[needOf(value, encoding)] = replacement;
  }

  /// The ops the slice recomputes.
  std::set<Operation *> recomputedOps() const {
    std::set<Operation *> ops;
    for (auto &entry : clones_)
      ops.insert(entry.first);
    return ops;
  }

  /// Clones the collected slice (in program order, each clone right after its original) and
  /// returns `root` in the target encoding.
  Value *rewrite(Operation *func, Value *root, const EncodingPtr &target) {
    struct PendingYield {
      Operation *loop;
      unsigned carried;
      EncodingPtr encoding;
    };
    std::vector<PendingYield> pending;
    for (Operation *op : opsInOrder(func)) {
      if (auto it = newCarried_.find(op); it != newCarried_.end())
        for (auto &[carried, encoding] : it->second) {
          std::vector<Value *> operands = op->operands();
          operands.push_back(lookup(op->operand(3 + carried), encoding));
          op->setOperands(operands);
          Type type = op->result(carried)->type().withEncoding(encoding);
          remember(op->body().argument(carried + 1), encoding, op->body().addArgument(type));
          op->addResult(type);
          pending.push_back({op, carried, encoding});
        }
      if (auto it = clones_.find(op); it != clones_.end())
        for (const EncodingPtr &encoding : it->second)
          cloneIn(op, encoding);
      for (auto &result : op->results())
        if (auto it = boundaries_.find(result.get()); it != boundaries_.end())
          for (const EncodingPtr &encoding : it->second) {
            Builder builder;
            builder.setInsertionPointAfter(op);
            remember(result.get(), encoding, createConvert(builder, result.get(), encoding));
          }
    }
    for (const PendingYield &yield : pending) {
      Operation *terminator = yield.loop->body().terminator();
      std::vector<Value *> operands = terminator->operands();
      operands.push_back(lookup(terminator->operand(yield.carried), yield.encoding));
      terminator->setOperands(operands);
    }
    return lookup(root, target);
  }

private:
  void remember(Value *original, const EncodingPtr &encoding, Value *recomputed) {
    Need need = needOf(original, encoding);
    made_[need] = recomputed;
    cache_[need] = recomputed;
  }

  Value *lookup(Value *value, const EncodingPtr &encoding) {
    Need need = needOf(value, encoding);
    while (alias_.count(need))
      need = alias_.at(need);
    if (auto it = ready_.find(need); it != ready_.end())
      return it->second;
    return made_.at(need);
  }

  void cloneIn(Operation *op, const EncodingPtr &encoding) {
    std::vector<Value *> operands;
    for (unsigned i = 0; i < op->numOperands(); ++i) {
      EncodingPtr operandLayout = operandEncoding(*op, i, encoding);
      operands.push_back(operandLayout ? lookup(op->operand(i), operandLayout) : op->operand(i));
    }
    Builder builder;
    builder.setInsertionPointAfter(op);
    Operation *copy;
    if (op->numRegions()) { // reduce, scan: the combiner region comes along
      std::map<Value *, Value *> mapping;
      for (unsigned i = 0; i < op->numOperands(); ++i)
        mapping[op->operand(i)] = operands[i];
      copy = builder.insert(op->clone(mapping));
      for (auto &result : copy->results())
        if (result->type().isTensor())
          result->setType(result->type().withEncoding(encoding));
    } else {
      copy = builder.create(op->code(), operands, {op->result()->type().withEncoding(encoding)},
                            op->attributes());
      copy->setLocation(op->location());
    }
    for (unsigned i = 0; i < op->numResults(); ++i)
      remember(op->result(i), encoding, copy->result(i));
  }

  std::map<Need, Value *> &cache_;
  const int numThreads_;
  std::map<Need, Value *> ready_, made_;
  std::map<Need, Need> alias_;
  std::map<Operation *, std::vector<EncodingPtr>> clones_;
  /// Values the slice converts rather than recomputes.
  std::map<Value *, std::vector<EncodingPtr>> boundaries_;
  std::map<Operation *, std::vector<std::pair<unsigned, EncodingPtr>>> newCarried_;
};

/// The source encoding of a conversion that feeds `value` through ops that can produce any
/// layout and keep it (so the source is also an encoding of `value`: not through expand_dims,
/// whose operand is a Slice of a lower rank), inside `body`; null when there is none.
EncodingPtr convertedFrom(Value *value, Block &body, const EncodingPtr &current) {
  std::vector<Value *> worklist{value};
  std::set<Value *> seen;
  while (!worklist.empty() && seen.size() < kMaxSliceSize) {
    Value *next = worklist.back();
    worklist.pop_back();
    Operation *def = next->definingOp();
    if (!seen.insert(next).second || !def || !def->isInside(body.parentOp()))
      continue;
    if (def->code() == OpCode::ConvertLayout) {
      EncodingPtr source = def->operand(0)->type().encoding();
      if (source && !sameEncoding(source, current))
        return source;
    } else if (followsResultLayout(*def) && def->code() != OpCode::Load &&
               def->code() != OpCode::ExpandDims) {
      for (Value *operand : def->operands())
        if (operand->type().isTensor())
          worklist.push_back(operand);
    }
  }
  return nullptr;
}

// Plan step 3: carried value `carried` of `loop` is computed, each iteration, from a value
// converted out of another layout (an accumulator fed by a coalesced load): carry it in that
// layout instead, so the conversion in the loop becomes one before it (of the init) and one
// after it (of the result), which step 2 may then dissolve.
bool retypeCarriedValue(Operation *func, Operation *loop, unsigned carried,
                        std::map<Need, Value *> &cache) {
  Block &body = loop->body();
  Value *argument = body.argument(carried + 1);
  Operation *yield = body.terminator();
  Value *yielded = yield->operand(carried);
  EncodingPtr current = argument->type().encoding();
  if (!current)
    return false;
  EncodingPtr candidate = convertedFrom(yielded, body, current);
  if (!candidate)
    return false;
  Rematerialization slice(cache, /*numThreads=*/0); // loads stay where they are
  slice.assume(argument, candidate, nullptr);       // the new block argument, made below
  if (!slice.collect(yielded, candidate))
    return false;
  // Only worth it when the old chain dies: the argument and every recomputed op of the body
  // feed nothing but the recomputed ops and this carried value's yield.
  std::set<Operation *> recomputed = slice.recomputedOps();
  auto onlyFeedsTheChain = [&](Value *value) {
    for (const OperandUse &use : usesOf(value))
      if (!recomputed.count(use.user) && !(use.user == yield && use.index == carried))
        return false;
    return true;
  };
  if (!onlyFeedsTheChain(argument))
    return false;
  for (Operation *op : recomputed)
    if (op->isInside(loop) && !onlyFeedsTheChain(op->result()))
      return false;

  Builder builder;
  builder.setInsertionPoint(loop);
  std::vector<Value *> operands = loop->operands();
  operands.push_back(createConvert(builder, loop->operand(3 + carried), candidate));
  loop->setOperands(operands);
  Type type = argument->type().withEncoding(candidate);
  slice.assume(argument, candidate, body.addArgument(type));
  Value *result = loop->addResult(type);
  std::vector<Value *> yields = yield->operands();
  yields.push_back(slice.rewrite(func, yielded, candidate));
  yield->setOperands(yields);
  builder.setInsertionPointAfter(loop);
  Value *back = createConvert(builder, result, current);
  loop->result(carried)->replaceAllUsesWith(back);
  return true;
}

/// Computed from scalars alone by ops that can produce any layout (no loads), so that step 2
/// recomputes it in whatever layout it is converted to.
bool isComputedFromScalars(Value *value, int depth = 0) {
  Operation *def = value->definingOp();
  if (!def || depth > 16 || !followsResultLayout(*def) || def->code() == OpCode::Load)
    return false;
  for (Value *operand : def->operands())
    if (operand->type().isTensor() && !isComputedFromScalars(operand, depth + 1))
      return false;
  return true;
}

// Plan step 5.
bool reduceBeforeConverting(Operation *func) {
  bool changed = false;
  for (Operation *op : opsInOrder(func)) {
    if (op->code() != OpCode::Reduce)
      continue;
    EncodingPtr source;
    bool movable = true;
    std::vector<Operation *> converts(op->numOperands(), nullptr);
    for (unsigned i = 0; i < op->numOperands() && movable; ++i) {
      Value *operand = op->operand(i);
      Operation *def = operand->definingOp();
      bool onlyHere = std::all_of(operand->users().begin(), operand->users().end(),
                                  [&](Operation *user) { return user == op; });
      if (def && def->code() == OpCode::ConvertLayout && onlyHere) {
        EncodingPtr from = def->operand(0)->type().encoding();
        movable = from && (!source || sameEncoding(source, from));
        source = from;
        converts[i] = def;
      } else {
        movable = isComputedFromScalars(operand);
      }
    }
    if (!movable || !source)
      continue;
    auto slice =
        std::make_shared<const SliceEncoding>(static_cast<int>(op->intAttr("axis")), source);
    Builder builder;
    builder.setInsertionPoint(op);
    for (unsigned i = 0; i < op->numOperands(); ++i)
      op->setOperand(i, converts[i] ? converts[i]->operand(0)
                                    : createConvert(builder, op->operand(i), source));
    builder.setInsertionPointAfter(op);
    for (auto &result : op->results()) {
      if (!result->type().isTensor())
        continue;
      EncodingPtr wanted = result->type().encoding();
      std::vector<OperandUse> uses = usesOf(result.get());
      result->setType(result->type().withEncoding(slice));
      Value *converted = createConvert(builder, result.get(), wanted);
      for (const OperandUse &use : uses)
        use.user->setOperand(use.index, converted);
    }
    for (Operation *convert : converts)
      if (convert && !convert->result()->hasUses())
        convert->erase();
    changed = true;
  }
  return changed;
}

// Chained dots (plan step 2, continued): an A operand that cannot be recomputed in its
// #dot_op layout, but can be in the #mma layout of its dot (P = softmax(Q K^T) cast to f16),
// is recomputed there; #mma -> #dot_op<{opIdx = 0}> is then a register permutation when all
// warps lie along M (accelerate_matmul puts them there for chained dots).
bool recomputeInAccumulatorLayout(Operation *func, Operation *convert,
                                  std::map<Need, Value *> &cache, int numThreads) {
  const auto *operand =
      dynamic_cast<const DotOperandEncoding *>(convert->result()->type().encoding().get());
  if (!operand || operand->getOpIdx() != 0 || !operand->getMmaParent())
    return false;
  const EncodingPtr &parent = operand->getParent();
  if (sameEncoding(convert->operand(0)->type().encoding(), parent))
    return false;
  Rematerialization slice(cache, numThreads);
  if (!slice.collect(convert->operand(0), parent))
    return false;
  convert->setOperand(0, slice.rewrite(func, convert->operand(0), parent));
  return true;
}

void removeConversionsInFunction(Operation *func, int numThreads) {
  // Every round removes conversions or moves them out of a loop, so this ends; the bound is
  // insurance.
  propagateAccumulatorLayouts(func); // dot_layout_rules.h
  bool changed = true;
  for (int round = 0; changed && round < 64; ++round) {
    changed = foldConversions(func);
    changed = moveCastsBeforeAccumulatorConversions(func) || changed; // dot_layout_rules.h
    std::map<Need, Value *> cache; // valid until dead ops are erased
    std::vector<Operation *> ops = opsInOrder(func);
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      Operation *convert = *it;
      if (convert->code() != OpCode::ConvertLayout || !convert->result()->hasUses())
        continue;
      EncodingPtr target = convert->result()->type().encoding();
      Rematerialization slice(cache, numThreads);
      if (!target || !slice.collect(convert->operand(0), target)) {
        changed = recomputeInAccumulatorLayout(func, convert, cache, numThreads) || changed;
        continue;
      }
      Value *replacement = slice.rewrite(func, convert->operand(0), target);
      convert->result()->replaceAllUsesWith(replacement);
      convert->erase();
      changed = true;
    }
    for (Operation *op : opsInOrder(func))
      if (op->code() == OpCode::For)
        for (unsigned i = 0; i < op->numResults(); ++i)
          if (op->result(i)->type().isTensor())
            changed = retypeCarriedValue(func, op, i, cache) || changed;
    eraseDeadOps(func->body()); // plan step 4 (dce's helper: dead ops and carried values)
    changed = reduceBeforeConverting(func) || changed;
  }
}

} // namespace

void removeLayoutConversions(Module &module) {
  for (Operation *func : module.functions())
    removeConversionsInFunction(func, moduleNumWarps(module) * kThreadsPerWarp);
}

TESSERA_REGISTER_PASS(remove_layout_conversions, "remove_layout_conversions",
                      "Fold convert_layout ops and recompute cheap producers (splat, make_range, "
                      "elementwise chains, loop-carried pointers) in the needed encoding",
                      removeLayoutConversions);

} // namespace tessera::transforms
