// The address slice: which integer values become pointer offsets, and which kernel arguments a
// pointer may point into (see address_slice.h).
#include "analysis/address_slice.h"

namespace tessera::analysis {

using ir::Block;
using ir::OpCode;
using ir::Operation;
using ir::Value;

SliceStep sliceStep(const Operation &op) {
  switch (op.code()) {
  case OpCode::AddI:
  case OpCode::SubI:
  case OpCode::MulI:
  case OpCode::DivSI:
  case OpCode::RemSI:
  case OpCode::MaxSI:
  case OpCode::MinSI:
  case OpCode::AndI:
  case OpCode::OrI:
  case OpCode::XOrI:
  case OpCode::ShLI:
  case OpCode::ShRSI: return SliceStep::Arithmetic;
  case OpCode::Splat:
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::ConvertLayout:
  case OpCode::Trans: return SliceStep::Shape;
  case OpCode::Select: return SliceStep::Select;
  case OpCode::ExtSI: return SliceStep::Extend;
  case OpCode::Constant: return SliceStep::Constant;
  default: return SliceStep::Leaf;
  }
}

std::vector<OffsetUse> offsetUses(Operation &func) {
  std::vector<OffsetUse> uses;
  func.walk([&](Operation *op) {
    if (op->code() == OpCode::AddPtr)
      uses.push_back({op, 1});
    else if (op->code() == OpCode::IntToPtr)
      uses.push_back({op, 0});
  });
  return uses;
}

namespace {

/// The `for` whose body has `value` as a carried argument (not the induction variable).
Operation *carryingLoop(const Value *value) {
  Block *block = value->ownerBlock();
  Operation *parent = block ? block->parentOp() : nullptr;
  if (!parent || parent->code() != OpCode::For || value->index() == 0)
    return nullptr;
  return parent;
}

/// The values a loop-carried argument or a for/if result is made of (empty: none, a leaf).
std::vector<Value *> regionSources(Value *value) {
  if (Operation *loop = carryingLoop(value)) {
    unsigned carried = value->index() - 1;
    return {loop->operand(3 + carried), loop->body().terminator()->operand(carried)};
  }
  Operation *def = value->definingOp();
  if (!def)
    return {};
  if (def->code() == OpCode::For)
    return {def->body().argument(value->index() + 1)};
  if (def->code() == OpCode::If)
    return {def->body(0).terminator()->operand(value->index()),
            def->body(1).terminator()->operand(value->index())};
  return {};
}

} // namespace

void walkAddressSlice(Value *offset, std::set<Value *> &seen,
                      const std::function<void(Value *)> &visit) {
  std::vector<Value *> work{offset};
  while (!work.empty()) {
    Value *value = work.back();
    work.pop_back();
    if (!value->type().elementType().isInteger() || !seen.insert(value).second)
      continue;
    visit(value);
    for (Value *source : regionSources(value))
      work.push_back(source);
    Operation *def = value->definingOp();
    if (!def)
      continue;
    switch (sliceStep(*def)) {
    case SliceStep::Arithmetic:
    case SliceStep::Shape:
    case SliceStep::Extend:
      work.insert(work.end(), def->operands().begin(), def->operands().end());
      break;
    case SliceStep::Select:
      work.push_back(def->operand(1));
      work.push_back(def->operand(2));
      break;
    case SliceStep::Constant:
    case SliceStep::Leaf: break;
    }
  }
}

std::set<unsigned> pointerOrigins(Operation &func, Value *pointer, bool &unknown) {
  std::set<unsigned> origins;
  std::set<Value *> seen;
  std::vector<Value *> work{pointer};
  Block &entry = func.body();
  while (!work.empty()) {
    Value *value = work.back();
    work.pop_back();
    if (!seen.insert(value).second)
      continue;
    if (value->ownerBlock() == &entry) {
      origins.insert(value->index());
      continue;
    }
    std::vector<Value *> sources = regionSources(value);
    Operation *def = value->definingOp();
    if (def && (def->code() == OpCode::AddPtr || sliceStep(*def) == SliceStep::Shape))
      sources.push_back(def->operand(0));
    else if (def && def->code() == OpCode::Select)
      sources = {def->operand(1), def->operand(2)};
    if (sources.empty())
      unknown = true; // loaded from memory, inttoptr, a while loop's value, ...
    work.insert(work.end(), sources.begin(), sources.end());
  }
  return origins;
}

} // namespace tessera::analysis
