// findWgmmaHazards: membar's wgmma groups checked by running loops with concrete ring slots
// (see wgmma_hazards.h). Plan:
// 1. Walk the func in program order; each `for` body runs `iterations` times, its slot
//    counters (shared_access.h) taking their values at each iteration.
// 2. A wgmma dot pushes a group: the concrete bytes of its shared operands (a ring's slot when
//    the slot is a counter or a constant, else the whole buffer).
// 3. A barrier keeps its newest `wgmma_pending` groups; an op whose lowering has a barrier of
//    its own (scratch, mbarrier setup) keeps none.
// 4. A write (local_alloc with a source, async_copy, tma_load, an op's scratch) that overlaps
//    a group still held is a hazard.
// 5. if: each arm from the same groups, going on with the one that holds more; while: the
//    condition region, then the body, `iterations` times.
#include "analysis/wgmma_hazards.h"

#include "analysis/shared_access.h"
#include "analysis/shared_footprint.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

namespace tessera::analysis {

namespace {

using ir::OpCode;

struct Group {
  const ir::Operation *dot;
  std::vector<ByteRange> reads;
};

class HazardFinder {
public:
  explicit HazardFinder(int iterations) : iterations_(iterations) {}

  void walk(ir::Block &block, std::vector<Group> &groups) {
    for (auto &op : block.operations())
      visit(*op, groups);
  }
  std::vector<std::string> hazards;

private:
  void visit(ir::Operation &op, std::vector<Group> &groups);

  /// The bytes of `buffer` (a local_alloc) that an access at `slot` touches (plan step 2).
  std::optional<ByteRange> bytesOf(const ir::Value *buffer, const ir::Value *slot) const {
    const ir::Operation *alloc = buffer->definingOp();
    if (!alloc || alloc->code() != OpCode::LocalAlloc || !alloc->hasAttr("offset"))
      return std::nullopt;
    ByteRange whole{alloc->intAttr("offset"), alloc->intAttr("offset") + localAllocBytes(*alloc)};
    if (!slot || !isRingAlloc(*alloc))
      return whole;
    std::optional<int64_t> index = slotValue(slot);
    if (!index)
      return whole;
    int64_t slots = buffer->type().shape()[0];
    int64_t bytes = (whole.end - whole.begin) / slots;
    return ByteRange{whole.begin + *index % slots * bytes,
                     whole.begin + (*index % slots + 1) * bytes};
  }
  std::optional<int64_t> slotValue(const ir::Value *slot) const {
    if (const ir::Operation *def = slot->definingOp()) {
      if (def->code() == OpCode::Constant)
        if (const int64_t *value = std::get_if<int64_t>(&def->attr("value")))
          return *value;
      return std::nullopt;
    }
    RingSlot counter = ringSlotOf(slot);
    auto iteration = iteration_.find(counter.loop);
    if (!counter.known() || iteration == iteration_.end())
      return std::nullopt;
    return (counter.offset + iteration->second) % counter.stages;
  }

  void write(const ir::Operation &op, std::optional<ByteRange> bytes,
             const std::vector<Group> &groups) {
    for (const Group &group : groups)
      for (const ByteRange &read : group.reads)
        if (!bytes || read.overlaps(*bytes)) {
          std::ostringstream line;
          line << op.name() << " at " << op.location() << " may overwrite what the wgmma of "
               << group.dot->location() << " reads";
          if (std::find(hazards.begin(), hazards.end(), line.str()) == hazards.end())
            hazards.push_back(line.str());
          return;
        }
  }

  int iterations_;
  std::map<const ir::Operation *, int64_t> iteration_; // of each loop being run
};

void HazardFinder::visit(ir::Operation &op, std::vector<Group> &groups) {
  switch (op.code()) {
  case OpCode::Dot: // plan step 2
    if (isWgmmaDot(op)) {
      Group group{&op, {}};
      for (unsigned i = 0; i < 2; ++i) {
        const ir::Operation *source = op.operand(i)->definingOp();
        if (source && source->code() == OpCode::LocalLoad)
          if (std::optional<ByteRange> bytes = bytesOf(
                  source->operand(0), source->numOperands() > 1 ? source->operand(1) : nullptr))
            group.reads.push_back(*bytes);
      }
      groups.push_back(std::move(group));
    }
    return;
  case OpCode::WarpSpecialize: return; // the producer's warps issue no wgmma
  case OpCode::MBarrierArrive:         // a warp releases a slot once its groups but N retired
  case OpCode::Barrier: {              // plan step 3
    auto keep = static_cast<size_t>(
        std::max<int64_t>(op.hasAttr("wgmma_pending") ? op.intAttr("wgmma_pending") : 0, 0));
    if (groups.size() > keep)
      groups.erase(groups.begin(), groups.end() - static_cast<std::ptrdiff_t>(keep));
    return;
  }
  case OpCode::MBarrierInit:
  case OpCode::MBarrierInval: groups.clear(); return;
  case OpCode::LocalAlloc: // plan step 4
    if (op.numOperands() == 1)
      write(op, bytesOf(op.result(), nullptr), groups);
    return;
  case OpCode::AsyncCopy:
  case OpCode::TmaLoad: write(op, bytesOf(op.operand(1), op.operand(2)), groups); return;
  case OpCode::For: // plan step 1
    for (int t = 0; t < iterations_; ++t) {
      iteration_[&op] = t;
      walk(op.body(), groups);
    }
    iteration_.erase(&op);
    return;
  case OpCode::While: // plan step 5
    for (int t = 0; t < iterations_; ++t) {
      walk(op.body(0), groups);
      walk(op.body(1), groups);
    }
    walk(op.body(0), groups);
    return;
  case OpCode::If: {
    std::vector<Group> other = groups;
    walk(op.body(0), groups);
    if (op.numRegions() > 1)
      walk(op.body(1), other);
    if (other.size() > groups.size())
      groups = std::move(other);
    return;
  }
  default: break;
  }
  if (op.hasAttr("scratch_offset") && scratchBytes(op) > 0) { // writes, then its own barrier
    int64_t offset = op.intAttr("scratch_offset");
    write(op, ByteRange{offset, offset + scratchBytes(op)}, groups);
    groups.clear();
  }
}

} // namespace

std::vector<std::string> findWgmmaHazards(ir::Operation &func, int iterations) {
  HazardFinder finder(iterations);
  std::vector<Group> groups;
  finder.walk(func.body(), groups);
  return finder.hazards;
}

} // namespace tessera::analysis
