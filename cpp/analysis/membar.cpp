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
#include "layout/dot_operand.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace tessera::analysis {

using ir::OpCode;

bool BarrierState::operator==(const BarrierState &other) const {
  return reads == other.reads && writes == other.writes && asyncGroups == other.asyncGroups &&
         asyncUncommitted == other.asyncUncommitted && wgmmaGroups == other.wgmmaGroups &&
         bulkReads == other.bulkReads;
}

namespace {

/// Merges the lists of groups of two paths. Groups are counted from the newest (async_wait's
/// `pending` and wgmma.wait_group's N do): the lists are aligned there.
template <typename Group, typename Merge>
std::vector<Group> joinGroups(const std::vector<Group> &a, const std::vector<Group> &b,
                              Merge merge) {
  const std::vector<Group> &shorter = a.size() < b.size() ? a : b;
  std::vector<Group> result = a.size() < b.size() ? b : a;
  size_t offset = result.size() - shorter.size();
  for (size_t i = 0; i < shorter.size(); ++i)
    merge(result[offset + i], shorter[i]);
  return result;
}

void mergeAccesses(std::vector<SharedAccess> &into, const std::vector<SharedAccess> &from) {
  for (const SharedAccess &access : from)
    addAccess(into, access);
}

} // namespace

BarrierState BarrierState::join(const BarrierState &a, const BarrierState &b) {
  BarrierState result = a;
  result.reads.add(b.reads);
  result.writes.add(b.writes);
  result.asyncUncommitted.add(b.asyncUncommitted);
  result.asyncGroups = joinGroups(a.asyncGroups, b.asyncGroups,
                                  [](ByteRanges &into, const ByteRanges &from) { into.add(from); });
  result.wgmmaGroups = joinGroups(a.wgmmaGroups, b.wgmmaGroups, mergeAccesses);
  result.bulkReads.add(b.bulkReads);
  return result;
}

bool bulkDeferrable(const ir::Operation &op) {
  return op.hasAttr("scratch_offset") && tmaStoreTile(op).has_value();
}

bool wgmmaPipelining(const ir::Module &module) {
  return module.intAttrOr("wgmma_pipeline", 0) != 0 && module.intAttrOr("wgmma_overlap", 1) != 0;
}

namespace {

// More groups in flight than any pipeline keeps: older ones are merged (they stay in flight).
constexpr size_t kMaxAsyncGroups = 8;
constexpr int kMaxLoopIterations = 64;

/// Keeps at most `limit` groups, merging the oldest (they stay in flight).
template <typename Group, typename Merge>
void boundGroups(std::vector<Group> &groups, size_t limit, Merge merge) {
  while (groups.size() > limit) {
    merge(groups[1], groups[0]);
    groups.erase(groups.begin());
  }
}

/// The state at the top of the next iteration of `loop`, from the end of its body (plan step 7).
BarrierState acrossBackEdge(BarrierState state, const ir::Operation *loop) {
  for (std::vector<SharedAccess> &group : state.wgmmaGroups) {
    std::vector<SharedAccess> stepped;
    for (const SharedAccess &access : group)
      addAccess(stepped, stepBack(access, loop));
    group = std::move(stepped);
  }
  return state;
}

BarrierState afterLoop(BarrierState state, const ir::Operation *loop) {
  for (std::vector<SharedAccess> &group : state.wgmmaGroups) {
    std::vector<SharedAccess> forgotten;
    for (const SharedAccess &access : group)
      addAccess(forgotten, forgetLoop(access, loop));
    group = std::move(forgotten);
  }
  return state;
}

class BarrierInserter {
public:
  BarrierInserter(int64_t sharedSize, bool wgmmaInFlight, bool deferBulk, bool innerKeep)
      : sharedSize_(std::max<int64_t>(sharedSize, 1)), wgmmaInFlight_(wgmmaInFlight),
        deferBulk_(deferBulk), innerKeep_(innerKeep) {}
  /// Plan step 8's end: a barrier waiting for the bulk groups before `op` (the return).
  void bulkWaitBefore(ir::Operation &op) {
    BarrierState state;
    barrierBefore(op, state, true, 0, /*bulk=*/true);
  }

  BarrierState walkBlock(ir::Block &block, BarrierState state, bool insert) {
    for (auto &op : block.operations())
      visit(*op, state, insert);
    return state;
  }
  int inserted() const { return inserted_; }

private:
  void visit(ir::Operation &op, BarrierState &state, bool insert);
  BarrierState walkFor(ir::Operation &op, const BarrierState &given, bool insert);
  BarrierState loopEntry(ir::Operation &op, const BarrierState &in);
  int bodyBarriers(ir::Operation &loop, const BarrierState &in);
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
  /// The access of an op to `buffer`, at `slot` when the op indexes a ring (else null).
  SharedAccess accessOf(const ir::Value *buffer, const ir::Value *slot) const {
    return {bufferRange(buffer), slot ? ringSlotOf(slot) : RingSlot{}};
  }

  /// A barrier before `op` that leaves the newest `keep` wgmma groups in flight; `bulk`: one
  /// that first waits for the issuer's bulk groups to have read their scratch (plan step 8).
  void barrierBefore(ir::Operation &op, BarrierState &state, bool insert, size_t keep,
                     bool bulk = false) {
    ++wouldInsert_;
    if (insert) {
      ir::Builder builder;
      builder.setInsertionPoint(&op);
      builder.setLocation(op.location());
      std::map<std::string, ir::Attribute> attrs;
      if (wgmmaInFlight_)
        attrs["wgmma_pending"] = static_cast<int64_t>(keep);
      if (bulk)
        attrs["bulk_wait"] = static_cast<int64_t>(1);
      builder.create(OpCode::Barrier, {}, {}, std::move(attrs));
      ++inserted_;
    }
    passBarrier(state, keep, bulk);
  }
  static void passBarrier(BarrierState &state, size_t keep, bool bulk = false) {
    if (bulk)
      state.bulkReads.clear();
    state.reads.clear();
    state.writes.clear();
    if (state.wgmmaGroups.size() > keep)
      state.wgmmaGroups.erase(state.wgmmaGroups.begin(),
                              state.wgmmaGroups.end() - static_cast<std::ptrdiff_t>(keep));
  }
  /// A read of `range` by `op`; `pending`: one that stays pending as a wgmma group's instead
  /// of as a plain read (checked for read after write all the same).
  void read(ir::Operation &op, ByteRange range, BarrierState &state, bool insert,
            bool pending = false) {
    if (state.writes.overlaps(range)) // read after write: in-flight reads do not matter
      barrierBefore(op, state, insert, state.wgmmaGroups.size());
    if (!pending)
      state.reads.add(range);
  }
  /// What `op` writes to shared memory at once (or as it issues an asynchronous copy), if any.
  std::optional<SharedAccess> writeOf(const ir::Operation &op) const {
    switch (op.code()) {
    case OpCode::LocalAlloc:
      if (op.numOperands() == 1)
        return accessOf(op.result(), nullptr);
      return std::nullopt;
    case OpCode::AsyncCopy:
    case OpCode::TmaLoad: return accessOf(op.operand(1), op.operand(2));
    default:
      if (op.hasAttr("scratch_offset") && scratchOf(op) > 0) {
        int64_t offset = op.intAttr("scratch_offset");
        return SharedAccess{ByteRange{offset, offset + scratchOf(op)}, RingSlot{}};
      }
      return std::nullopt;
    }
  }
  /// The newest wgmma groups that none of the writes of `op` and of the straight-line ops after
  /// it (up to a barrier or an op with regions) may overlap: a barrier placed before `op`
  /// waits for the others once, not again before each copy of a stage.
  size_t groupsToKeep(ir::Operation &op, const BarrierState &state) const {
    size_t keep = state.wgmmaGroups.size();
    ir::Block &block = *op.parentBlock();
    for (auto it = block.find(&op); it != block.operations().end(); ++it) {
      const ir::Operation &next = **it;
      if (&next != &op && (next.code() == OpCode::Barrier || next.numRegions() > 0))
        break;
      if (next.code() == OpCode::TmaLoad && next.hasAttr("released"))
        continue; // owed no barrier (visit): the slot's empty mbarrier orders its reads
      std::optional<SharedAccess> access = writeOf(next);
      for (size_t g = 0; access && g < state.wgmmaGroups.size(); ++g)
        for (const SharedAccess &read : state.wgmmaGroups[g])
          if (mayOverlap(read, *access))
            keep = std::min(keep, state.wgmmaGroups.size() - 1 - g);
    }
    return keep;
  }
  /// Plan steps 3 and 6: a barrier before `op` when its write could race with accesses since
  /// the last barrier or with an in-flight wgmma's reads.
  void write(ir::Operation &op, BarrierState &state, bool insert) {
    ByteRange range = writeOf(op)->range;
    bool waits = false;
    for (const std::vector<SharedAccess> &group : state.wgmmaGroups)
      for (const SharedAccess &read : group)
        waits = waits || mayOverlap(read, *writeOf(op));
    bool bulk = state.bulkReads.overlaps(range);
    if (state.reads.overlaps(range) || state.writes.overlaps(range) || waits || bulk)
      barrierBefore(op, state, insert, groupsToKeep(op, state), bulk);
  }

  /// scratchBytes(op), computed once per op: the walk visits each op several times (loops
  /// until their fixed point, writeOf at each check), and a conversion's size comes from a
  /// search over shared tiles.
  int64_t scratchOf(const ir::Operation &op) const {
    auto [it, added] = scratch_.try_emplace(&op, 0);
    if (added)
      it->second = scratchBytes(op);
    return it->second;
  }

  int64_t sharedSize_;
  bool wgmmaInFlight_;
  bool deferBulk_;
  bool innerKeep_;
  int inserted_ = 0;
  int wouldInsert_ = 0; // barriers inserted or, in a dry walk, that would be
  mutable std::unordered_map<const ir::Operation *, int64_t> scratch_;
};

// Plan steps 2, 3, 5 and 6.
void BarrierInserter::visit(ir::Operation &op, BarrierState &state, bool insert) {
  switch (op.code()) {
  case OpCode::Barrier:
    passBarrier(state,
                static_cast<size_t>(std::max<int64_t>(
                    (op.hasAttr("wgmma_pending") ? op.intAttr("wgmma_pending") : 0), 0)),
                op.hasAttr("bulk_wait"));
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
      write(op, state, insert);
      state.writes.add(bufferRange(op.result()));
    }
    return;
  case OpCode::LocalLoad:
    // A wgmma operand is read by the dot, through a descriptor (plan step 5).
    read(op, bufferRange(op.operand(0)), state, insert,
         wgmmaInFlight_ && isWgmmaOperand(op.result()->type().encoding().get()));
    return;
  case OpCode::Dot: {
    bool inFlight = wgmmaInFlight_ && isWgmmaDot(op); // read until its group is waited for
    std::vector<SharedAccess> group;
    for (unsigned i = 0; i < 2; ++i) {
      const ir::Operation *source = op.operand(i)->definingOp();
      if (source && source->code() == OpCode::LocalLoad) {
        read(op, bufferRange(source->operand(0)), state, insert, inFlight);
        addAccess(group, accessOf(source->operand(0),
                                  source->numOperands() > 1 ? source->operand(1) : nullptr));
      }
    }
    if (inFlight) {
      state.wgmmaGroups.push_back(std::move(group));
      boundGroups(state.wgmmaGroups, kMaxAsyncGroups, mergeAccesses);
    }
    return;
  }
  case OpCode::AsyncCopy: {
    // The copy may land any time after it is issued: nobody may still use its bytes.
    write(op, state, insert);
    state.asyncUncommitted.add(bufferRange(op.operand(1)));
    return;
  }
  case OpCode::TmaLoad:
    // As async_copy, but its bytes become visible through the slot's mbarrier, which every
    // reader waits on (mbarrier_wait): no barrier is owed after it. A `released` copy is owed
    // none before it either: its issuing thread waited for every warp to release the slot
    // (the ring's empty mbarriers, after each warp's last read and wgmma of it); the ring's
    // bytes were last used by anything else before the barriers' init (its bar.sync).
    if (!op.hasAttr("released") || state.bulkReads.overlaps(writeOf(op)->range))
      write(op, state, insert);
    return;
  case OpCode::MBarrierInit: // ends in a bar.sync of its own (lower_tma.cpp), which waits
    passBarrier(state, 0);   // for every wgmma group
    return;
  case OpCode::MBarrierInval: // bar.sync, then one thread writes the barriers
    if (state.bulkReads.overlaps(bufferRange(op.operand(0))))
      barrierBefore(op, state, insert, 0, /*bulk=*/true);
    passBarrier(state, 0);
    state.writes.add(bufferRange(op.operand(0)));
    return;
  case OpCode::MBarrierExpectTx: // mbarriers order themselves
  case OpCode::MBarrierWait:
  case OpCode::MBarrierArrive: return;
  case OpCode::WarpSpecialize: // the producer's code: other warps, ordered by mbarriers alone
    return;
  case OpCode::AsyncCommitGroup:
    state.asyncGroups.push_back(state.asyncUncommitted);
    state.asyncUncommitted.clear();
    boundGroups(state.asyncGroups, kMaxAsyncGroups,
                [](ByteRanges &into, const ByteRanges &from) { into.add(from); });
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
  int64_t bytes = scratchOf(op);
  if (bytes == 0)
    return;
  // Writes its scratch, barrier (inside the op), reads it: only those reads stay pending. A
  // TMA store's or reduction's reads are its bulk copy's, pending until a barrier waits for
  // them (plan step 8).
  write(op, state, insert);
  // Its barrier keeps the newest groups that no write of the op or of the straight-line ops
  // after it may overlap (as a barrier op's wgmma_pending, plan step 6): the wgmma_waits pass
  // waits down to `inner_wgmma_pending` there instead of retiring every group.
  size_t keep = wgmmaInFlight_ && innerKeep_ ? groupsToKeep(op, state) : 0;
  if (insert && keep > 0)
    op.setAttr("inner_wgmma_pending", static_cast<int64_t>(keep));
  else if (insert)
    op.attributes().erase("inner_wgmma_pending");
  passBarrier(state, keep);
  state.reads.add(writeOf(op)->range);
  if (deferBulk_ && bulkDeferrable(op)) {
    op.setAttr("bulk_deferred", static_cast<int64_t>(1));
    state.bulkReads.add(writeOf(op)->range);
  }
}

// Plan step 4. The body may run zero times: the exit joins the entry state. Where accesses
// from before the loop would make the body pay a barrier at every iteration that one barrier
// before the loop saves (e.g. a tile stored to shared memory before a warp-specialized loop,
// whose rings need no barrier of their own), that barrier goes before the loop.
BarrierState BarrierInserter::walkFor(ir::Operation &op, const BarrierState &given, bool insert) {
  ir::Block &body = op.body();
  BarrierState in = given;
  if (!in.reads.empty() || !in.writes.empty()) {
    BarrierState cleared = in;
    passBarrier(cleared, cleared.wgmmaGroups.size());
    if (bodyBarriers(op, cleared) < bodyBarriers(op, in))
      barrierBefore(op, in, insert, in.wgmmaGroups.size());
  }
  BarrierState entry = loopEntry(op, in);
  return afterLoop(BarrierState::join(in, walkBlock(body, entry, insert)), &op);
}

/// The barriers one pass over the body of `loop` would insert, entered from `in`.
int BarrierInserter::bodyBarriers(ir::Operation &loop, const BarrierState &in) {
  BarrierState entry = loopEntry(loop, in);
  int before = wouldInsert_;
  walkBlock(loop.body(), entry, false);
  return wouldInsert_ - before;
}

/// The state at the top of every iteration of `op` entered from `in` (a fixed point).
BarrierState BarrierInserter::loopEntry(ir::Operation &op, const BarrierState &in) {
  ir::Block &body = op.body();
  BarrierState entry = in;
  for (int iteration = 0;; ++iteration) {
    BarrierState next = BarrierState::join(in, acrossBackEdge(walkBlock(body, entry, false), &op));
    if (next == entry)
      break;
    entry = next;
    if (iteration == kMaxLoopIterations) { // cannot happen (finite lattice); stay correct
      entry.reads.add(ByteRange{0, sharedSize_});
      entry.writes.add(ByteRange{0, sharedSize_});
      entry.wgmmaGroups.assign(1, {SharedAccess{ByteRange{0, sharedSize_}, RingSlot{}}});
      break;
    }
  }
  return entry;
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
      entry.wgmmaGroups.assign(1, {SharedAccess{ByteRange{0, sharedSize_}, RingSlot{}}});
      break;
    }
  }
  BarrierState exit = walkBlock(before, entry, insert); // the loop leaves after `before`
  walkBlock(after, exit, insert);
  return exit;
}

} // namespace

int insertBarriers(ir::Operation &func, bool wgmmaInFlight, bool innerKeep) {
  if (!func.hasAttr("shared_size"))
    ir::emitError(func, "membar: the func has no shared_size (run allocate_shared first)");
  bool specialized = false;
  func.walk([&](ir::Operation *op) { specialized |= op->code() == OpCode::WarpSpecialize; });
  BarrierInserter inserter(func.intAttr("shared_size"), wgmmaInFlight, !specialized, innerKeep);
  BarrierState end = inserter.walkBlock(func.body(), BarrierState{}, true);
  ir::Block &body = func.body();
  if (!end.bulkReads.empty() && !body.operations().empty())
    inserter.bulkWaitBefore(*body.operations().back()); // the return: no exit with reads pending
  return inserter.inserted();
}

} // namespace tessera::analysis
