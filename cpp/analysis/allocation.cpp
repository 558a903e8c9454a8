// Shared-memory allocation: offsets for every shared-memory buffer of a func, reusing bytes
// across disjoint live ranges (see allocation.h for the plan); the allocate_shared pass
// (transforms/allocate_shared.cpp) applies it to each func. Before and after, for a pipelined
// matmul whose epilogue converts the accumulator through shared memory:
//
//   %ring = local_alloc : () -> tensor<3x64x32xf16, #shared>          (no offset yet)
//   for ... { ... async_copy %p, %ring, %w ... local_load %ring, %r ... }
//   async_wait {pending = 0}
//   %c = convert_layout %acc : #mma -> #blocked
// becomes
//   func @k(...) {shared_size = 16384}
//   %ring = local_alloc {offset = 0} : ...
//   ...
//   %c = convert_layout %acc {scratch_offset = 0} : ...   (the ring is dead: its bytes reused)
#include "analysis/allocation.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

namespace tessera::analysis {

using ir::OpCode;

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Buffers of 1 KiB or more start on a 1 KiB boundary: wgmma's 128-byte swizzle is a
/// function of address bits 7-9, so a tile read through a descriptor must begin where the
/// pattern does (the descriptor's base offset is 0). Smaller ones need only 128 bytes.
/// A TMA store's or reduction's scratch too: the TMA reads it through the map's swizzle,
/// which is a function of the absolute address bits (tmaStoreTile).
int64_t alignmentOf(const SharedBuffer &buffer) {
  if (buffer.isScratch &&
      (buffer.op->code() == ir::OpCode::Store ||
       (buffer.op->code() == ir::OpCode::AtomicRMW && tmaStoreTile(*buffer.op))))
    return kWgmmaTileAlignment;
  return !buffer.isScratch && buffer.bytes >= kWgmmaTileAlignment ? kWgmmaTileAlignment
                                                                  : kSharedAlignment;
}

/// Program-order positions: each op's own, and the last one nested in it (its span).
struct Positions {
  std::map<const ir::Operation *, int64_t> first, last;
  int64_t next = 0;

  void number(ir::Operation &op) {
    first[&op] = next++;
    for (auto &region : op.regions())
      for (auto &block : region->blocks())
        for (auto &nested : block->operations())
          number(*nested);
    last[&op] = next - 1;
  }
};

/// The op of `block` that is or contains `op`; null when `op` is outside `block`.
ir::Operation *ancestorIn(ir::Operation *op, const ir::Block *block) {
  while (op && op->parentBlock() != block)
    op = op->parentOp();
  return op;
}

bool isControlFlow(const ir::Operation &op) {
  switch (op.code()) {
  case OpCode::For:
  case OpCode::If:
  case OpCode::While:
  case OpCode::Yield:
  case OpCode::Condition: return true;
  default: return false;
  }
}

/// The ops that touch the buffer: its users, and the dots that read a local_load of it (the
/// lowering reads their fragments lazily, right before the mma instructions).
std::vector<ir::Operation *> bufferUses(const ir::Operation &localAlloc) {
  std::vector<ir::Operation *> uses = localAlloc.result()->users();
  for (ir::Operation *user : localAlloc.result()->users())
    if (user->code() == OpCode::LocalLoad)
      for (ir::Operation *reader : user->result()->users())
        if (reader->code() == OpCode::Dot)
          uses.push_back(reader);
  return uses;
}

/// Last position at which the buffer of `localAlloc` is live.
int64_t lastUseOf(ir::Operation &localAlloc, const Positions &positions, int64_t funcEnd) {
  const ir::Block *block = localAlloc.parentBlock();
  int64_t last = positions.first.at(&localAlloc);
  bool asyncWritten = false;
  for (ir::Operation *use : bufferUses(localAlloc)) {
    ir::Operation *ancestor = ancestorIn(use, block);
    if (!ancestor || isControlFlow(*use))
      return funcEnd; // carried through control flow: no tracking, keep it to the end
    last = std::max(last, positions.last.at(ancestor));
    asyncWritten |= use->code() == OpCode::AsyncCopy;
  }
  if (!asyncWritten)
    return last;
  // Copies may still be landing until every group is drained (predicated-off tail copies
  // write zeros too): the buffer lives until the next async_wait {pending = 0}.
  for (const auto &op : block->operations())
    if (positions.first.at(op.get()) > last && op->code() == OpCode::AsyncWait &&
        op->intAttr("pending") == 0)
      return positions.first.at(op.get());
  return funcEnd;
}

/// The lowest aligned offset for `bytes` that overlaps none of `taken` ([begin, end) pairs).
int64_t firstFit(std::vector<std::pair<int64_t, int64_t>> taken, int64_t bytes, int64_t alignment) {
  std::sort(taken.begin(), taken.end());
  int64_t offset = 0;
  for (const auto &[begin, end] : taken) {
    if (offset + bytes <= begin)
      break;
    offset = std::max(offset, alignUp(end, alignment));
  }
  return offset;
}

} // namespace

SharedAllocation::SharedAllocation(ir::Operation &func) : func_(&func) {
  collectBuffers(func);
  placeFirstFit();
  separateConsecutiveScratch();
}

// Plan step 1.
void SharedAllocation::collectBuffers(ir::Operation &func) {
  Positions positions;
  positions.number(func);
  int64_t funcEnd = positions.last.at(&func);
  func.walk([&](ir::Operation *op) {
    SharedBuffer buffer;
    buffer.op = op;
    buffer.firstUse = positions.first.at(op);
    if (op->code() == OpCode::LocalAlloc) {
      try {
        buffer.bytes = localAllocBytes(*op);
      } catch (const std::exception &error) {
        ir::emitError(*op, std::string("allocate_shared: cannot size the buffer: ") + error.what());
      }
      buffer.lastUse = lastUseOf(*op, positions, funcEnd);
    } else {
      buffer.isScratch = true;
      buffer.bytes = scratchBytes(*op);
      buffer.lastUse = buffer.firstUse;
    }
    if (buffer.bytes > 0)
      buffers_.push_back(buffer);
  });
}

// Plan step 2.
void SharedAllocation::placeFirstFit() {
  std::vector<size_t> order(buffers_.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers_[a].bytes > buffers_[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (buffers_[i].liveAtOnce(buffers_[j]))
        taken.emplace_back(buffers_[j].offset, buffers_[j].end());
    buffers_[i].offset = firstFit(taken, buffers_[i].bytes, alignmentOf(buffers_[i]));
    totalBytes_ = std::max(totalBytes_, buffers_[i].end());
    placed.push_back(i);
  }
}

// Plan step 3. Buffers are collected in program order, so scratch is visited in that order.
void SharedAllocation::separateConsecutiveScratch() {
  const SharedBuffer *previous = nullptr;
  for (SharedBuffer &buffer : buffers_) {
    if (!buffer.isScratch)
      continue;
    if (previous && buffer.overlapsBytes(*previous)) {
      std::vector<std::pair<int64_t, int64_t>> taken{{previous->offset, previous->end()}};
      for (const SharedBuffer &other : buffers_)
        if (&other != &buffer && !other.isScratch && buffer.liveAtOnce(other))
          taken.emplace_back(other.offset, other.end());
      int64_t offset = firstFit(taken, buffer.bytes, alignmentOf(buffer));
      if (offset + buffer.bytes <= totalBytes_)
        buffer.offset = offset;
    }
    previous = &buffer;
  }
}

void SharedAllocation::apply() const {
  func_->walk([](ir::Operation *op) { op->attributes().erase("scratch_offset"); });
  for (const SharedBuffer &buffer : buffers_)
    buffer.op->setAttr(buffer.isScratch ? "scratch_offset" : "offset", buffer.offset);
  func_->attributes().erase("shared_reserved");
  func_->setAttr("shared_size", totalBytes_);
}

std::string SharedAllocation::str() const {
  std::ostringstream out;
  for (const SharedBuffer &buffer : buffers_)
    out << buffer.op->name() << (buffer.isScratch ? " scratch" : "") << ": [" << buffer.offset
        << ", " << buffer.end() << ") live [" << buffer.firstUse << ", " << buffer.lastUse << "]\n";
  out << "total " << totalBytes_ << "\n";
  return out.str();
}

} // namespace tessera::analysis
