// Shared-memory byte ranges and ring slots for membar (see shared_access.h).
#include "analysis/shared_access.h"

#include "analysis/shared_footprint.h"
#include "layout/mma.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <tuple>

namespace tessera::analysis {

using ir::OpCode;

void ByteRanges::add(ByteRange range) {
  if (range.begin >= range.end)
    return;
  ranges_.push_back(range);
  std::sort(ranges_.begin(), ranges_.end(),
            [](const ByteRange &a, const ByteRange &b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange &next : ranges_) {
    if (!merged.empty() && next.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, next.end);
    else
      merged.push_back(next);
  }
  ranges_ = std::move(merged);
}

void ByteRanges::add(const ByteRanges &other) {
  for (const ByteRange &range : other.ranges_)
    add(range);
}

bool ByteRanges::overlaps(ByteRange range) const {
  for (const ByteRange &mine : ranges_)
    if (mine.overlaps(range))
      return true;
  return false;
}

std::string ByteRanges::str() const {
  std::ostringstream out;
  for (const ByteRange &range : ranges_)
    out << "[" << range.begin << ", " << range.end << ")";
  return out.str();
}

namespace {

std::optional<int64_t> constantOf(const ir::Value *value) {
  const ir::Operation *def = value->definingOp();
  if (!def || def->code() != OpCode::Constant || value->type().isTensor())
    return std::nullopt;
  if (const int64_t *integer = std::get_if<int64_t>(&def->attr("value")))
    return *integer;
  return std::nullopt;
}

/// Whether `value` is `base + 1`.
bool isIncrement(const ir::Value *value, const ir::Value *base) {
  const ir::Operation *add = value->definingOp();
  if (!add || add->code() != OpCode::AddI)
    return false;
  for (unsigned i = 0; i < 2; ++i)
    if (add->operand(i) == base && constantOf(add->operand(1 - i)) == int64_t{1})
      return true;
  return false;
}

/// The modulus S when `next` is `select(base + 1 == S, 0, base + 1)`.
std::optional<int64_t> wrappingStep(const ir::Value *next, const ir::Value *base) {
  const ir::Operation *select = next->definingOp();
  if (!select || select->code() != OpCode::Select || constantOf(select->operand(1)) != 0 ||
      !isIncrement(select->operand(2), base))
    return std::nullopt;
  const ir::Operation *wraps = select->operand(0)->definingOp();
  if (!wraps || wraps->code() != OpCode::CmpI || wraps->stringAttr("predicate") != "eq" ||
      wraps->operand(0) != select->operand(2))
    return std::nullopt;
  std::optional<int64_t> stages = constantOf(wraps->operand(1));
  if (!stages || *stages < 1)
    return std::nullopt;
  return stages;
}

} // namespace

RingSlot ringSlotOf(const ir::Value *slot) {
  const ir::Block *body = slot->ownerBlock();
  const ir::Operation *loop = body ? body->parentOp() : nullptr;
  if (!loop || loop->code() != OpCode::For || slot->index() == 0 || slot->type().isTensor())
    return {};
  unsigned carried = slot->index() - 1;
  std::optional<int64_t> start = constantOf(loop->operand(3 + carried));
  std::optional<int64_t> stages = wrappingStep(body->terminator()->operand(carried), slot);
  if (!start || !stages || *start < 0 || *start >= *stages)
    return {};
  return {loop, *stages, *start};
}

bool mayOverlap(const SharedAccess &a, const SharedAccess &b) {
  if (!a.range.overlaps(b.range))
    return false;
  if (a.range == b.range && a.slot.known() && a.slot.loop == b.slot.loop &&
      a.slot.stages == b.slot.stages)
    return a.slot.offset == b.slot.offset; // slot indices (c + t) mod S: equal iff c equal
  return true;
}

SharedAccess stepBack(SharedAccess access, const ir::Operation *loop) {
  if (access.slot.loop == loop)
    access.slot.offset = (access.slot.offset + access.slot.stages - 1) % access.slot.stages;
  return access;
}

SharedAccess forgetLoop(SharedAccess access, const ir::Operation *loop) {
  if (access.slot.loop == loop)
    access.slot = RingSlot{};
  return access;
}

bool isWgmmaDot(const ir::Operation &op) {
  if (op.code() != OpCode::Dot)
    return false;
  const auto *mma = dynamic_cast<const MmaEncoding *>(op.result()->type().encoding().get());
  return mma && mma->isWgmma();
}

bool leavesWgmmaGroup(const ir::Operation &op) {
  if (!isWgmmaDot(op))
    return false;
  const ir::Type &a = op.operand(0)->type();
  bool promotes = a.bitWidth() == 8 && op.hasAttr("max_num_imprecise_acc") &&
                  op.intAttr("max_num_imprecise_acc") <= a.shape()[1];
  return !promotes;
}

bool drainsWgmmaGroups(const ir::Operation &op) {
  switch (op.code()) {
  case OpCode::Reduce:
  case OpCode::Scan: return scratchBytes(op) > 0;
  case OpCode::Barrier:
  case OpCode::MBarrierArrive:
    return !op.hasAttr("wgmma_pending") || op.intAttr("wgmma_pending") == 0;
  case OpCode::MBarrierInit:
  case OpCode::MBarrierInval:
  case OpCode::Print:
  case OpCode::Assert: return true;
  default: return op.numRegions() > 0 || op.hasAttr("scratch_offset") || scratchBytes(op) > 0;
  }
}

std::vector<unsigned> carriedWgmmaAccumulators(const ir::Operation &loop, bool rescaled) {
  std::vector<unsigned> carried;
  const ir::Block &body = loop.regions().front()->front();
  const std::vector<ir::Value *> &yielded = body.terminator()->operands();
  for (const auto &op : body.operations()) {
    if (!isWgmmaDot(*op) || std::count(yielded.begin(), yielded.end(), op->result()) != 1)
      continue;
    auto index = static_cast<unsigned>(std::find(yielded.begin(), yielded.end(), op->result()) -
                                       yielded.begin());
    const ir::Value *next = body.argument(index + 1);
    bool chainedOnly =
        std::all_of(next->users().begin(), next->users().end(), [&](const ir::Operation *user) {
          return isWgmmaDot(*user) && user->operand(0) != next && user->operand(1) != next;
        });
    // A rescaled product whose register A operand is the loop's own carried value (the
    // attention forward's OVERLAP order: P of the step before) must be retired before the back
    // edge, where the next step's value takes those registers while the product still reads
    // them (measured wrong on an H200; wgmma_register_a keeps A live only to a wait).
    const ir::Value *a = op->operand(0);
    while (a->definingOp() && a->definingOp()->code() == ir::OpCode::ConvertLayout)
      a = a->definingOp()->operand(0);
    bool carriedA = std::any_of(body.arguments().begin(), body.arguments().end(),
                                [&](const auto &argument) { return argument.get() == a; });
    if (chainedOnly || (rescaled && !carriedA))
      carried.push_back(index);
  }
  return carried;
}

bool carriesRescaledProducts(const ir::Module &module) {
  return module.intAttrOr("wgmma_carry_rescaled", 0) != 0;
}

void addAccess(std::vector<SharedAccess> &set, const SharedAccess &access) {
  if (std::find(set.begin(), set.end(), access) != set.end())
    return;
  set.push_back(access);
  // One order for equal sets, so that membar's loop iteration sees its fixed point.
  auto key = [](const SharedAccess &a) {
    return std::make_tuple(a.range.begin, a.range.end, a.slot.loop, a.slot.stages, a.slot.offset);
  };
  std::sort(set.begin(), set.end(),
            [&](const SharedAccess &a, const SharedAccess &b) { return key(a) < key(b); });
}

} // namespace tessera::analysis
