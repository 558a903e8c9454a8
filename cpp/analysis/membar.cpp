// membar's analysis: inserts `barrier` ops into a func where threads could race on shared
// memory (see membar.h for the plan; the pass over a module is transforms/membar.cpp). Before and
// after, two conversions through shared memory on disjoint scratch, then one that reuses the
// first's bytes:
//
//   %a = convert_layout %x {scratch_offset = 0}       %a = convert_layout %x {scratch_offset = 0}
//   %b = convert_layout %y {scratch_offset = 4096}    %b = convert_layout %y {scratch_offset =
//   4096} %c = convert_layout %z {scratch_offset = 0}       barrier
//                                                     %c = convert_layout %z {scratch_offset = 0}
// Nothing before %b: its bytes are not %a's. Before %c nothing either: %b's own barrier (between
// its stores and its loads) already ordered %a's loads. Each conversion keeps that one internal
// barrier, so %a, %b, %c cost 3 bar.sync, not the 6 of a barrier before and after each.
#include "analysis/membar.h"

#include "analysis/shared_footprint.h"
#include "ir/builder.h"
#include "ir/diagnostics.h"

#include <algorithm>
#include <limits>
#include <sstream>

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
    if (mine.begin < range.end && range.begin < mine.end)
      return true;
  return false;
}

std::string ByteRanges::str() const {
  std::ostringstream out;
  for (const ByteRange &range : ranges_)
    out << "[" << range.begin << ", " << range.end << ")";
  return out.str();
}

bool BarrierState::operator==(const BarrierState &other) const {
  return reads == other.reads && writes == other.writes && asyncGroups == other.asyncGroups &&
         asyncUncommitted == other.asyncUncommitted;
}

BarrierState BarrierState::join(const BarrierState &a, const BarrierState &b) {
  BarrierState result = a;
  result.reads.add(b.reads);
  result.writes.add(b.writes);
  result.asyncUncommitted.add(b.asyncUncommitted);
  // Groups are counted from the newest (async_wait's `pending` does): align the lists there.
  const std::vector<ByteRanges> &shorter =
      a.asyncGroups.size() < b.asyncGroups.size() ? a.asyncGroups : b.asyncGroups;
  result.asyncGroups = a.asyncGroups.size() < b.asyncGroups.size() ? b.asyncGroups : a.asyncGroups;
  size_t offset = result.asyncGroups.size() - shorter.size();
  for (size_t i = 0; i < shorter.size(); ++i)
    result.asyncGroups[offset + i].add(shorter[i]);
  return result;
}

namespace {

// More groups in flight than any pipeline keeps: older ones are merged (they stay in flight).
constexpr size_t kMaxAsyncGroups = 8;
constexpr int kMaxLoopIterations = 64;

class BarrierInserter {
public:
  explicit BarrierInserter(int64_t sharedSize) : sharedSize_(std::max<int64_t>(sharedSize, 1)) {}

  BarrierState walkBlock(ir::Block &block, BarrierState state, bool insert) {
    for (auto &op : block.operations())
      visit(*op, state, insert);
    return state;
  }
  int inserted() const { return inserted_; }

private:
  void visit(ir::Operation &op, BarrierState &state, bool insert);
  BarrierState walkFor(ir::Operation &op, const BarrierState &in, bool insert);
  BarrierState walkWhile(ir::Operation &op, const BarrierState &in, bool insert);

  /// The bytes of a buffer value: its local_alloc's; all of shared memory if unknown.
  ByteRange bufferRange(const ir::Value *buffer) const {
    const ir::Operation *alloc = buffer->definingOp();
    if (alloc && alloc->code() == OpCode::LocalAlloc && alloc->hasAttr("offset")) {
      int64_t offset = alloc->intAttr("offset");
      return {offset, offset + localAllocBytes(*alloc)};
    }
    return {0, sharedSize_};
  }

  void barrierBefore(ir::Operation &op, BarrierState &state, bool insert) {
    if (insert) {
      ir::Builder builder;
      builder.setInsertionPoint(&op);
      builder.setLocation(op.location());
      builder.create(OpCode::Barrier, {}, {});
      ++inserted_;
    }
    state.reads.clear();
    state.writes.clear();
  }
  void read(ir::Operation &op, ByteRange range, BarrierState &state, bool insert) {
    if (state.writes.overlaps(range)) // read after write
      barrierBefore(op, state, insert);
    state.reads.add(range);
  }
  /// Whether writing `range` now could race with accesses since the last barrier.
  static bool writeConflicts(const BarrierState &state, ByteRange range) {
    return state.reads.overlaps(range) || state.writes.overlaps(range);
  }

  int64_t sharedSize_;
  int inserted_ = 0;
};

// Plan steps 2 and 3.
void BarrierInserter::visit(ir::Operation &op, BarrierState &state, bool insert) {
  switch (op.code()) {
  case OpCode::Barrier:
    state.reads.clear();
    state.writes.clear();
    return;
  case OpCode::For: state = walkFor(op, state, insert); return;
  case OpCode::While: state = walkWhile(op, state, insert); return;
  case OpCode::If: {
    BarrierState thenState = walkBlock(op.body(0), state, insert);
    BarrierState elseState = op.numRegions() > 1 ? walkBlock(op.body(1), state, insert) : state;
    state = BarrierState::join(thenState, elseState);
    return;
  }
  case OpCode::LocalAlloc:
    if (op.numOperands() == 1) { // stores its source
      ByteRange range = bufferRange(op.result());
      if (writeConflicts(state, range))
        barrierBefore(op, state, insert);
      state.writes.add(range);
    }
    return;
  case OpCode::LocalLoad: read(op, bufferRange(op.operand(0)), state, insert); return;
  case OpCode::Dot:
    for (unsigned i = 0; i < 2; ++i) {
      const ir::Operation *source = op.operand(i)->definingOp();
      if (source && source->code() == OpCode::LocalLoad)
        read(op, bufferRange(source->operand(0)), state, insert);
    }
    return;
  case OpCode::AsyncCopy: {
    // The copy may land any time after it is issued: nobody may still use its bytes.
    ByteRange range = bufferRange(op.operand(1));
    if (writeConflicts(state, range))
      barrierBefore(op, state, insert);
    state.asyncUncommitted.add(range);
    return;
  }
  case OpCode::TmaLoad: {
    // As async_copy, but its bytes become visible through the slot's mbarrier, which every
    // reader waits on (mbarrier_wait): no barrier is owed after it.
    ByteRange range = bufferRange(op.operand(1));
    if (writeConflicts(state, range))
      barrierBefore(op, state, insert);
    return;
  }
  case OpCode::MBarrierInit: // ends in a bar.sync of its own (lower_tma.cpp)
    state.reads.clear();
    state.writes.clear();
    return;
  case OpCode::MBarrierInval: // bar.sync, then one thread writes the barriers
    state.reads.clear();
    state.writes.clear();
    state.writes.add(bufferRange(op.operand(0)));
    return;
  case OpCode::MBarrierExpectTx: // mbarriers order themselves
  case OpCode::MBarrierWait: return;
  case OpCode::AsyncCommitGroup:
    state.asyncGroups.push_back(state.asyncUncommitted);
    state.asyncUncommitted.clear();
    while (state.asyncGroups.size() > kMaxAsyncGroups) {
      state.asyncGroups[1].add(state.asyncGroups[0]);
      state.asyncGroups.erase(state.asyncGroups.begin());
    }
    return;
  case OpCode::AsyncWait: {
    // This thread's copies of the retired groups have landed: visible to the others after the
    // next barrier, exactly like its own stores.
    auto pending = static_cast<size_t>(std::max<int64_t>(op.intAttr("pending"), 0));
    while (state.asyncGroups.size() > pending) {
      state.writes.add(state.asyncGroups.front());
      state.asyncGroups.erase(state.asyncGroups.begin());
    }
    return;
  }
  default: break;
  }
  if (!op.hasAttr("scratch_offset"))
    return;
  int64_t bytes = scratchBytes(op);
  if (bytes == 0)
    return;
  // Writes its scratch, barrier (inside the op), reads it: only those reads stay pending.
  int64_t offset = op.intAttr("scratch_offset");
  ByteRange range{offset, offset + bytes};
  if (writeConflicts(state, range))
    barrierBefore(op, state, insert);
  state.reads.clear();
  state.writes.clear();
  state.reads.add(range);
}

// Plan step 4. The body may run zero times: the exit joins the entry state.
BarrierState BarrierInserter::walkFor(ir::Operation &op, const BarrierState &in, bool insert) {
  ir::Block &body = op.body();
  BarrierState entry = in;
  for (int iteration = 0;; ++iteration) {
    BarrierState next = BarrierState::join(in, walkBlock(body, entry, false));
    if (next == entry)
      break;
    entry = next;
    if (iteration == kMaxLoopIterations) { // cannot happen (finite lattice); stay correct
      entry.reads.add(ByteRange{0, sharedSize_});
      entry.writes.add(ByteRange{0, sharedSize_});
      break;
    }
  }
  return BarrierState::join(in, walkBlock(body, entry, insert));
}

BarrierState BarrierInserter::walkWhile(ir::Operation &op, const BarrierState &in, bool insert) {
  ir::Block &before = op.body(0), &after = op.body(1);
  BarrierState entry = in;
  for (int iteration = 0;; ++iteration) {
    BarrierState afterEnd = walkBlock(after, walkBlock(before, entry, false), false);
    BarrierState next = BarrierState::join(in, afterEnd);
    if (next == entry)
      break;
    entry = next;
    if (iteration == kMaxLoopIterations) {
      entry.reads.add(ByteRange{0, sharedSize_});
      entry.writes.add(ByteRange{0, sharedSize_});
      break;
    }
  }
  BarrierState exit = walkBlock(before, entry, insert); // the loop leaves after `before`
  walkBlock(after, exit, insert);
  return exit;
}

} // namespace

int insertBarriers(ir::Operation &func) {
  if (!func.hasAttr("shared_size"))
    ir::emitError(func, "membar: the func has no shared_size (run allocate_shared first)");
  BarrierInserter inserter(func.intAttr("shared_size"));
  inserter.walkBlock(func.body(), BarrierState{}, true);
  return inserter.inserted();
}

} // namespace tessera::analysis
