// Cross-tile prefetch of a TMA-pipelined loop in a persistent kernel's tile loop (see
// cross_tile.h): the plan (whether the loop qualifies, and what its copies need from the tile
// loop) and the pieces pipeline.cpp puts together.
#include "transforms/pipeline/cross_tile.h"

#include "analysis/shared_footprint.h"

#include <algorithm>
#include <optional>
#include <set>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

/// The sm_90 limit of a block's dynamic shared memory (227 KiB; TMA rings exist only there).
constexpr int64_t kSharedLimit = 232448;

std::optional<int64_t> constantOf(const Value *value) {
  const Operation *def = value->definingOp();
  if (!def || def->code() != OpCode::Constant || value->type().isTensor())
    return std::nullopt;
  if (const int64_t *integer = std::get_if<int64_t>(&def->attr("value")))
    return *integer;
  return std::nullopt;
}

/// Whether `value` is defined inside `outer` (an argument of one of its blocks, or an op's
/// result anywhere in it).
bool definedIn(const Value *value, const Operation *outer) {
  if (const Operation *def = value->definingOp())
    return def->isInside(outer);
  const Operation *owner = value->ownerBlock()->parentOp();
  return owner && (owner == outer || owner->isInside(outer));
}

/// Scalar work that may be redone for the next tile: pure, no regions, no tensors, no memory.
bool recomputable(const Operation &op) {
  if (op.numRegions() > 0 || !op.hasTrait(trait::PURE))
    return false;
  for (const auto &result : op.results())
    if (result->type().isTensor())
      return false;
  return true;
}

int64_t tileBytes(const Operation &load) {
  const Type &type = load.result()->type();
  int64_t elements = 1;
  for (int64_t size : type.shape())
    elements *= size;
  return elements * type.bitWidth() / 8;
}

/// Shared memory that may be live beside the rings: every buffer of the func (another loop's
/// rings already hoisted before the tile loop, say) and the largest scratch of the tile
/// loop's body outside the loop (an op's scratch is live at that op only).
int64_t otherBytes(Operation *outer, const Operation *loop) {
  Operation *func = outer;
  while (func->parentOp())
    func = func->parentOp();
  int64_t allocs = 0, scratch = 0;
  func->walk([&](Operation *op) {
    if (op->code() == OpCode::LocalAlloc)
      allocs += analysis::localAllocBytes(*op);
    else if (op->isInside(outer) && op != loop && !op->isInside(loop))
      scratch = std::max(scratch, analysis::scratchBytes(*op));
  });
  return allocs + scratch;
}

Value *binary(Builder &builder, OpCode code, Value *lhs, Value *rhs,
              const std::string &predicate = "") {
  Type type = code == OpCode::CmpI ? Type::i1() : lhs->type();
  std::map<std::string, Attribute> attrs;
  if (!predicate.empty())
    attrs["predicate"] = predicate;
  return builder.create(code, {lhs, rhs}, {type}, std::move(attrs))->result();
}

Value *select(Builder &builder, Value *condition, Value *a, Value *b) {
  return builder.create(OpCode::Select, {condition, a, b}, {a->type()})->result();
}

Value *i32(Builder &builder, int64_t value) { return builder.constantInt(value, Type::i32()); }

/// (value / S) & 1 (`flip`: xor 1), the parity of the phase of iteration `value`'s slot.
Value *parityOf(Builder &builder, Value *iteration, int numStages, bool flip) {
  Value *round = binary(builder, OpCode::DivSI, iteration, i32(builder, numStages));
  Value *parity = binary(builder, OpCode::AndI, round, i32(builder, 1));
  return flip ? binary(builder, OpCode::XOrI, parity, i32(builder, 1)) : parity;
}

Value *slotOf(Builder &builder, Value *iteration, int numStages) {
  return binary(builder, OpCode::RemSI, iteration, i32(builder, numStages));
}

} // namespace

CrossTilePlan crossTilePlan(const LoopSchedule &schedule) {
  CrossTilePlan plan;
  Operation *loop = schedule.loop;
  Operation *outer = loop->parentOp();
  auto reject = [&](const std::string &why) {
    plan.reason = why;
    return plan;
  };
  if (!outer || outer->code() != OpCode::For || loop->parentBlock() != &outer->body())
    return reject("not directly in the body of a for");
  if (loop->operand(0)->type() != Type::i32() || outer->operand(0)->type() != Type::i32())
    return reject("an induction variable is not i32");
  std::optional<int64_t> outerStep = constantOf(outer->operand(2));
  if (!outerStep || *outerStep <= 0)
    return reject("the tile loop's step is not a positive constant");
  for (unsigned i = 0; i < 3; ++i)
    if (definedIn(loop->operand(i), outer))
      return reject("the loop's bounds change from tile to tile");
  if (!schedule.aheadCarried.empty())
    return reject("the copies' coordinates follow a recurrence of the loop");

  // The ahead ops the TMA operands (map, coordinates) need, and the tile values they read.
  std::set<Operation *> ahead(schedule.aheadOps.begin(), schedule.aheadOps.end()), needed;
  std::set<Value *> tileValues, seen;
  std::vector<Value *> work;
  for (const PipelinedLoad &pipelined : schedule.loads)
    for (unsigned i = 3; i < pipelined.load->numOperands(); ++i)
      work.push_back(pipelined.load->operand(i));
  while (!work.empty()) {
    Value *value = work.back();
    work.pop_back();
    if (!seen.insert(value).second || !definedIn(value, outer))
      continue; // invariant
    Operation *def = value->definingOp();
    if (!def) { // a block argument of the loop or of the tile loop
      if (value->index() != 0)
        return reject("a coordinate depends on a loop-carried value");
      if (value->ownerBlock() == &outer->body())
        tileValues.insert(value);
      else if (value->ownerBlock() != &loop->body())
        return reject("a coordinate depends on a nested region's argument");
      continue;
    }
    if (def->isInside(loop)) {
      if (!ahead.count(def))
        return reject("a coordinate is computed inside a nested region");
      needed.insert(def);
      for (Value *operand : def->operands())
        work.push_back(operand);
      continue;
    }
    if (def->parentBlock() != &outer->body())
      return reject("a coordinate is computed inside a nested region of the tile loop");
    if (value->type().isTensor())
      return reject("a coordinate depends on a tensor of the tile loop");
    tileValues.insert(value);
  }

  // The tile values' slice in the tile loop's body.
  std::set<Operation *> tileOps;
  for (Value *value : tileValues)
    work.push_back(value);
  seen.clear();
  while (!work.empty()) {
    Value *value = work.back();
    work.pop_back();
    if (!seen.insert(value).second || !definedIn(value, outer))
      continue;
    Operation *def = value->definingOp();
    if (!def) {
      if (value->ownerBlock() != &outer->body() || value->index() != 0)
        return reject("a tile value depends on a value the tile loop carries");
      continue;
    }
    if (def->parentBlock() != &outer->body() || !recomputable(*def))
      return reject(std::string("a tile value needs '") + def->name() +
                    "' (only pure scalar ops of the tile loop's induction variable are redone "
                    "for the next tile)");
    if (tileOps.insert(def).second)
      for (Value *operand : def->operands())
        work.push_back(operand);
  }

  int64_t ringBytes = 0;
  for (const PipelinedLoad &pipelined : schedule.loads)
    ringBytes += tileBytes(*pipelined.load) * schedule.numStages;
  int64_t barrierBytes = 2 * 128;
  if (ringBytes + barrierBytes + otherBytes(outer, loop) > kSharedLimit)
    return reject("the rings and the tile loop's other shared memory would not fit at once");

  for (auto &op : loop->body().operations())
    if (needed.count(op.get()))
      plan.aheadOps.push_back(op.get());
  if (tileValues.count(outer->body().argument(0)))
    plan.tileValues.push_back(outer->body().argument(0));
  for (auto &op : outer->body().operations()) {
    if (!tileOps.count(op.get()))
      continue;
    plan.tileOps.push_back(op.get());
    for (auto &result : op->results())
      if (tileValues.count(result.get()))
        plan.tileValues.push_back(result.get());
  }
  plan.outer = outer;
  return plan;
}

void cloneAheadOps(Builder &builder, const std::vector<Operation *> &ops, Mapping &mapping,
                   Value *inRange) {
  auto mapped = [&](Value *value) {
    auto it = mapping.find(value);
    return it == mapping.end() ? value : it->second;
  };
  for (Operation *op : ops) {
    std::vector<Value *> operands;
    for (Value *operand : op->operands())
      operands.push_back(mapped(operand));
    if (op->code() == OpCode::Load) {
      Type element = op->result()->type();
      if (operands.size() == 1)
        operands.push_back(inRange);
      else
        operands[1] = binary(builder, OpCode::AndI, operands[1], inRange);
      if (operands.size() == 2)
        operands.push_back(element.isFloat() ? builder.constantFloat(0.0, element)
                                             : builder.constantInt(0, element));
    }
    std::vector<Type> types;
    for (auto &result : op->results())
      types.push_back(result->type());
    Operation *copy = builder.create(op->code(), operands, types, op->attributes());
    copy->setLocation(op->location());
    for (unsigned i = 0; i < op->numResults(); ++i)
      mapping[op->result(i)] = copy->result(i);
  }
}

CrossTile beginCrossTile(const CrossTilePlan &plan, const LoopSchedule &schedule,
                         const IssueStage &issue) {
  Operation *outer = plan.outer, *loop = schedule.loop;
  Block &body = outer->body();
  int numStages = schedule.numStages, distance = numStages - 1;
  CrossTile tile;
  tile.plan = &plan;

  // n, before the tile loop: ceil((ub - lb) / step), at least 0.
  Builder before;
  before.setInsertionPoint(outer);
  before.setLocation(outer->location());
  Value *lower = loop->operand(0), *upper = loop->operand(1), *step = loop->operand(2);
  Value *span = binary(before, OpCode::SubI, upper, lower);
  span = binary(before, OpCode::AddI, span, binary(before, OpCode::SubI, step, i32(before, 1)));
  tile.iterations =
      binary(before, OpCode::MaxSI, binary(before, OpCode::DivSI, span, step), i32(before, 0));

  // g, carried by the tile loop from 0, + n per tile.
  std::vector<Value *> operands = outer->operands();
  operands.push_back(i32(before, 0));
  outer->setOperands(operands);
  tile.done = body.addArgument(Type::i32());
  outer->addResult(Type::i32());
  Operation *yield = body.terminator();
  Builder atYield;
  atYield.setInsertionPoint(yield);
  std::vector<Value *> yielded = yield->operands();
  yielded.push_back(binary(atYield, OpCode::AddI, tile.done, tile.iterations));
  yield->setOperands(yielded);

  // The next tile's values, before the loop.
  Builder at;
  at.setInsertionPoint(loop);
  at.setLocation(loop->location());
  // Past the tile loop's end they are this tile's (copies of the next tile are off then): the
  // tile loop's own ops may not be defined there (a group size of 0 divides by it).
  Value *iv = body.argument(0);
  Value *nextIv = binary(at, OpCode::AddI, iv, outer->operand(2));
  tile.nextInRange = binary(at, OpCode::CmpI, nextIv, outer->operand(1), "slt");
  Mapping next{{iv, select(at, tile.nextInRange, nextIv, iv)}};
  cloneAheadOps(at, plan.tileOps, next, nullptr);
  for (Value *value : plan.tileValues)
    tile.nextTile[value] = next.at(value);

  // This tile's stages that the previous tile did not prefetch: every one on the first tile
  // (g = 0), else those the previous loop's steps could not reach (j < D - n).
  Value *first = binary(at, OpCode::CmpI, tile.done, i32(at, 0), "eq");
  Value *unreached = binary(at, OpCode::SubI, i32(at, distance), tile.iterations);
  Value *loopIv = loop->body().argument(0);
  for (int j = 0; j < distance; ++j) {
    Value *exists = binary(at, OpCode::CmpI, i32(at, j), tile.iterations, "slt");
    Value *notPrefetched =
        binary(at, OpCode::OrI, first, binary(at, OpCode::CmpI, i32(at, j), unreached, "slt"));
    Value *inRange = binary(at, OpCode::AndI, exists, notPrefetched);
    Value *iteration = binary(at, OpCode::AddI, tile.done, i32(at, j));
    Mapping mapping{
        {loopIv, binary(at, OpCode::AddI, lower, binary(at, OpCode::MulI, i32(at, j), step))}};
    cloneAheadOps(at, plan.aheadOps, mapping, inRange);
    issue(at, mapping, slotOf(at, iteration, numStages), inRange,
          parityOf(at, iteration, numStages, true));
  }
  return tile;
}

RingState ringStateAt(Builder &at, const CrossTile &tile, int numStages) {
  Value *written = binary(at, OpCode::AddI, tile.done, i32(at, numStages - 1));
  return {slotOf(at, tile.done, numStages), parityOf(at, tile.done, numStages, false),
          slotOf(at, written, numStages), parityOf(at, written, numStages, true)};
}

Value *aheadAcrossTiles(Builder &at, const CrossTile &tile, const LoopSchedule &schedule,
                        Value *aheadIv, Mapping &mapping) {
  Operation *loop = schedule.loop;
  Value *upper = loop->operand(1), *step = loop->operand(2);
  Value *thisTile = binary(at, OpCode::CmpI, aheadIv, upper, "slt");
  Value *nextIv =
      binary(at, OpCode::SubI, aheadIv, binary(at, OpCode::MulI, tile.iterations, step));
  Value *nextExists =
      binary(at, OpCode::AndI, tile.nextInRange, binary(at, OpCode::CmpI, nextIv, upper, "slt"));
  mapping[loop->body().argument(0)] = select(at, thisTile, aheadIv, nextIv);
  for (Value *value : tile.plan->tileValues)
    mapping[value] = select(at, thisTile, value, tile.nextTile.at(value));
  return binary(at, OpCode::OrI, thisTile, nextExists);
}

} // namespace tessera::transforms::pipeline
