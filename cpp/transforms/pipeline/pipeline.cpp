// pipeline: software pipelining of the loads that feed dots (cp.async rings, sm_80 style).
// Runs after the layout passes; the schedule (which loads, which ops run ahead) comes from
// scheduleLoop (schedule.h). With S = num_stages and D = S - 1:
//
//   for %k = %lb to %ub step %s iter(%p = %p0, %acc = %c0) {
//     %a = load %p, %mask : ... #blocked
//     %x = convert_layout %a : ... -> #dot_op<{opIdx = 0, ...}>
//     %acc2 = dot %x, ..., %acc
//     %p2 = addptr %p, %step
//     yield %p2, %acc2 }
// becomes
//   %ring = local_alloc : () -> tensor<S x 128x32xf16, #shared<...>>
//   (for j in 0 .. D-1: the address ops for iteration j, async_copy into slot j masked by
//    lb + j*s < ub, async_commit_group)
//   for %k ... iter(%p = %p0, %acc = %c0, %pa = <p of iteration D>, %r = 0, %w = D) {
//     async_wait {pending = D - 1}; barrier
//     (address ops for iteration k + D from %pa, async_copy into slot %w masked by
//      k + D*s < ub, async_commit_group)
//     %x = local_load %ring, %r : ... -> #dot_op<{opIdx = 0, ...}>
//     %acc2 = dot %x, ..., %acc
//     ...
//     yield %p2, %acc2, <p of iteration k + D + 1>, (%r + 1) % S, (%w + 1) % S }
//   async_wait {pending = 0}
//
// Plan:
// 1. A ring of S slots per pipelined load (allocate_shared gives it an offset later).
// 2. Prologue: D iterations' copies, each from its own clone of the ahead ops.
// 3. Loop: carry the ahead ops' carried inputs D iterations ahead, plus the read and write
//    slots; wait for the oldest group and barrier (the copies land, and every warp is done
//    reading the slot about to be overwritten: it was read last iteration); issue iteration
//    k + D; read iteration k's slot where the loads' conversions were.
// 4. After the loop, wait for the (empty, predicated-off) copies still in flight.
// With the module's wgmma_pipeline, the copies go after the step's first wgmma product instead
// (see pipelineLoop; docs/perf/wgmma_across_iterations.md).
// Copies past the end are predicated off: cp.async then reads nothing and writes zeros into a
// slot nobody reads again (no peeled epilogue).
// With the module's `tma` = 1 and descriptor loads that carry their tensor maps, the same plan
// copies with TMA and waits on an mbarrier per slot instead of cp.async groups (tma.h); such
// loads need no per-thread runs (ragged shapes), as the TMA copies boxes. A loop the TMA plan
// rejects is scheduled again for cp.async (a mixed TMA loop also copies 1-D pointer loads by
// cp.async: tma.h), and a descriptor load no TMA plan took drops its
// tensor map: it is the plain masked load. A TMA loop in the tile loop of a persistent kernel
// that asks for it (tl.range(flatten=True)) copies across tiles (cross_tile.h).
#include "transforms/pipeline/cross_tile.h"
#include "transforms/pipeline/device_tensor_maps.h"
#include "transforms/pipeline/schedule.h"
#include "transforms/pipeline/tma.h"
#include "transforms/pipeline/warp_specialize.h"

#include "analysis/axis_info.h"
#include "analysis/membar.h"
#include "analysis/shared_footprint.h"
#include "ir/builder.h"
#include "ir/pass_manager.h"
#include "ir/verify_tma.h"
#include "layout/blocked.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"
#include "transforms/layout_passes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

Value *mapped(const Mapping &mapping, Value *value) {
  auto it = mapping.find(value);
  return it == mapping.end() ? value : it->second;
}

Value *constant(Builder &builder, int64_t value, Type type) {
  return builder.constantInt(value, type);
}

Value *binary(Builder &builder, OpCode code, Value *lhs, Value *rhs,
              std::map<std::string, Attribute> attrs = {}) {
  Type type = code == OpCode::CmpI ? Type::i1() : lhs->type();
  return builder.create(code, {lhs, rhs}, {type}, std::move(attrs))->result();
}

/// Clones the schedule's ahead ops at the builder (cloneAheadOps, cross_tile.h).
void cloneAhead(Builder &builder, const LoopSchedule &schedule, Mapping &mapping, Value *inRange) {
  cloneAheadOps(builder, schedule.aheadOps, mapping, inRange);
}

/// One async_copy per pipelined load into `slot` of its ring (masked by `inRange` and the
/// load's own mask), then a commit: one group per iteration. `tma`: only the loads the TMA
/// does not copy (a mixed loop's rows of scalars; issueTmaCopies copies the others).
void issueCopies(Builder &builder, const LoopSchedule &schedule, const std::vector<Value *> &rings,
                 const Mapping &mapping, Value *slot, Value *inRange, bool tma) {
  for (size_t i = 0; i < schedule.loads.size(); ++i) {
    if (tma && copiedByTma(schedule.loads[i]))
      continue;
    Operation *load = schedule.loads[i].load;
    Value *pointers = mapped(mapping, load->operand(0));
    Type maskType = pointers->type().withElement(Type::i1());
    Value *mask = builder.create(OpCode::Splat, {inRange}, {maskType})->result();
    if (load->numOperands() >= 2)
      mask = binary(builder, OpCode::AndI, mapped(mapping, load->operand(1)), mask);
    Operation *copy = builder.create(OpCode::AsyncCopy, {pointers, rings[i], slot, mask}, {});
    copy->setLocation(load->location());
  }
  builder.create(OpCode::AsyncCommitGroup, {}, {});
}

Value *nextSlot(Builder &builder, Value *slot, int numStages) {
  Value *next = binary(builder, OpCode::AddI, slot, constant(builder, 1, Type::i32()));
  Value *wraps = binary(builder, OpCode::CmpI, next, constant(builder, numStages, Type::i32()),
                        {{"predicate", std::string("eq")}});
  return builder
      .create(OpCode::Select, {wraps, constant(builder, 0, Type::i32()), next}, {Type::i32()})
      ->result();
}

// Plan step 1.
std::vector<Value *> allocateRings(Builder &builder, const LoopSchedule &schedule) {
  std::vector<Value *> rings;
  for (const PipelinedLoad &load : schedule.loads) {
    const Type &tile = load.load->result()->type();
    const auto &slotEncoding = static_cast<const SharedEncoding &>(*load.slotEncoding);
    std::vector<int64_t> shape{schedule.numStages};
    shape.insert(shape.end(), tile.shape().begin(), tile.shape().end());
    Type type = Type::tensor(shape, tile.elementType(), withRingDim(slotEncoding));
    rings.push_back(builder.create(OpCode::LocalAlloc, {}, {type})->result());
  }
  return rings;
}

/// A local_load of `ring`'s `slot`, placed before `before`, in `replaced`'s type: it takes
/// `replaced`'s uses.
void readSlotInstead(Operation *before, Value *replaced, Value *ring, Value *slot,
                     const std::string &location, std::map<std::string, Attribute> attrs = {}) {
  Builder at;
  at.setInsertionPoint(before);
  Operation *read =
      at.create(OpCode::LocalLoad, {ring, slot}, {replaced->type()}, std::move(attrs));
  read->setLocation(location);
  replaced->replaceAllUsesWith(read->result());
}

/// The first top-level wgmma dot of the loop body that reads a pipelined tile (through one of
/// the conversions that become reads of its ring), or null. Null too when no product of the
/// loop can stay in flight across iterations: none is carried as a chained accumulator
/// (analysis::carriedWgmmaAccumulators: else wgmma_waits waits for it at the back edge), an op
/// of the body waits for every group (analysis::drainsWgmmaGroups), or a body dot on wgmma reads
/// a tile computed in the loop that materialize_wgmma_operands will stage through shared
/// memory at every step (restaging it must wait for the previous step's product).
Operation *firstRingProduct(const LoopSchedule &schedule, bool rescaled) {
  std::vector<unsigned> carried = analysis::carriedWgmmaAccumulators(*schedule.loop, rescaled);
  if (carried.empty())
    return nullptr;
  // A carried product read otherwise than as an accumulator next step (the rescale): the
  // copies go after the step's last ring product, into the slot whose products the wait
  // before that reader retired (a wait_group 1 after the first product would retire the
  // carried group where ptxas does not credit it, serializing every wgmma: C7514).
  bool last = carried != analysis::carriedWgmmaAccumulators(*schedule.loop);
  std::set<const Operation *> ringReads, replaced; // ops the rewrite removes
  for (const PipelinedLoad &load : schedule.loads) {
    replaced.insert(load.load);
    replaced.insert(load.transposes.begin(), load.transposes.end());
    replaced.insert(load.conversions.begin(), load.conversions.end());
    for (const OperandRead &read : load.reads)
      ringReads.insert(read.convert);
  }
  replaced.insert(ringReads.begin(), ringReads.end());
  Operation *first = nullptr;
  for (auto &op : schedule.loop->body().operations()) {
    if (!replaced.count(op.get()) && analysis::drainsWgmmaGroups(*op))
      return nullptr; // wgmma_waits waits for every group there (no loop carries any)
    if (op->code() != OpCode::Dot || !isWgmmaOperand(op->operand(1)->type().encoding().get()))
      continue;
    for (unsigned i = 0; i < 2; ++i) {
      Operation *source = op->operand(i)->definingOp();
      if (ringReads.count(source)) {
        first = first && !last ? first : op.get();
        continue;
      }
      bool stagedEachStep = source && source->isInside(schedule.loop) &&
                            source->code() == OpCode::ConvertLayout &&
                            !(i == 0 && wgmmaOperandStaysInRegisters(*source));
      if (stagedEachStep)
        return nullptr;
    }
  }
  return first;
}

/// A descriptor load that no TMA pipeline took (outside a loop, in a loop that is not
/// pipelined, or pipelined with cp.async) is the plain masked load it always meant: its tensor
/// map and box coordinates go (codegen lowers a load from its pointers alone).
///
/// A descriptor store with its map (TESSERA_TMA_STORE) is a TMA store where the module asks
/// for the TMA path and analysis::tmaStoreTile accepts it: it stages its value in shared
/// memory itself, from any layout, so a conversion of that value (the #mma accumulator to the
/// coalesced layout of the pointer tile) is skipped (dce erases it) and the stmatrix path of
/// codegen writes the accumulator's fragments directly. Any other such store drops its map.
///
/// A descriptor reduction with its map (TESSERA_TMA_REDUCE: an `atomic_rmw` with `tma`) is a
/// TMA reduction under the same rules (analysis::tmaStoreTile, which also needs a kind and
/// element type the TMA reduces: analysis::tmaReduction), its value from before a conversion
/// too. Any other drops its map: the masked atomic.
///
/// The TMA unit writes global memory in whole 16-byte chunks: where the tensor's inner extent
/// is not a multiple of 16 bytes, the chunk that straddles it is written whole, past the
/// tensor (into a neighbour's row padding or another tensor). So the TMA store is taken only
/// where AxisInfo proves the store's mask constant over 16-byte runs of the inner dim (the
/// proof a 16-byte vector store needs: the bound and the box's column both aligned), else the
/// masked store keeps its exact meaning. A reduction across the edge would combine into the
/// bytes past the row: the same proof.
bool masksWholeChunks(const analysis::AxisInfoAnalysis &axes, const Operation &store) {
  const Type &value = store.operand(1)->type();
  int64_t elementBytes = analysis::memoryElementBytes(value);
  return axes.maskAlignment(store.operand(2), value.rank() - 1) * elementBytes >= 16;
}

/// A TMA store or reduction stages its value itself: it takes it from before a conversion to
/// the pointer tile's layout (from the #mma accumulator, or a blocked layout: stmatrix or
/// st.shared write those), and dce erases the conversion.
void takeValueBeforeConversion(Operation &op) {
  Operation *convert = op.operand(1)->definingOp();
  if (!convert || convert->code() != OpCode::ConvertLayout)
    return;
  const Encoding *source = convert->operand(0)->type().encoding().get();
  if (dynamic_cast<const MmaEncoding *>(source) || dynamic_cast<const BlockedEncoding *>(source))
    op.setOperand(1, convert->operand(0));
}

void dropUnusedTensorMaps(Operation &func, bool tma) {
  std::optional<analysis::AxisInfoAnalysis> axes; // built at the first TMA store, if any
  auto wholeChunks = [&](const Operation &store) {
    if (!axes)
      axes.emplace(&func);
    return masksWholeChunks(*axes, store);
  };
  func.walk([tma, &wholeChunks](Operation *op) {
    if ((op->code() == OpCode::Store || op->code() == OpCode::AtomicRMW) && op->hasAttr("tma")) {
      if (!tma || !analysis::tmaStoreTile(*op) || !wholeChunks(*op)) {
        while (op->numOperands() > 3)
          op->eraseOperand(op->numOperands() - 1);
        op->attributes().erase("tma");
      } else {
        takeValueBeforeConversion(*op);
      }
      return;
    }
    if (op->code() != OpCode::Load || !op->hasAttr("tma"))
      return;
    while (op->numOperands() > plainLoadOperands(*op))
      op->eraseOperand(op->numOperands() - 1);
    op->attributes().erase("tma");
  });
  dropUnusedDeviceTensorMaps(func); // device_tensor_maps.h
}

/// Where each warp releases the TMA slot it read (mbarrier_arrive on the ring's empty
/// barriers), so that the issuing thread may overwrite it. With `product` (a step's first
/// ring product, left in flight across the back edge): right after it, the previous step's
/// slot, once that step's products retired (all groups but this step's so far), from the
/// second step on; returns the arrive. Else before the yield: this step's slot, every product
/// retired (the yield waits for them anyway).
Operation *releaseSlots(Operation *loop, Operation *product, Value *empty, Value *readSlot,
                        int numStages) {
  Block &body = loop->body();
  Builder at;
  at.setLocation(loop->location());
  if (!product) {
    at.setInsertionPoint(body.terminator());
    return at.create(OpCode::MBarrierArrive, {empty, readSlot, at.constantInt(1, Type::i1())}, {},
                     {{"wgmma_pending", int64_t(0)}});
  }
  int64_t issued = 0; // this step's wgmma groups up to the product: they stay in flight
  for (auto &op : body.operations()) {
    issued += analysis::isWgmmaDot(*op) ? 1 : 0;
    if (op.get() == product)
      break;
  }
  at.setInsertionPointAfter(product);
  Value *first = binary(at, OpCode::CmpI, readSlot, constant(at, 0, Type::i32()),
                        {{"predicate", std::string("eq")}});
  Value *previous = binary(at, OpCode::SubI, readSlot, constant(at, 1, Type::i32()));
  previous = at.create(OpCode::Select, {first, constant(at, numStages - 1, Type::i32()), previous},
                       {Type::i32()})
                 ->result();
  Value *notFirstStep = binary(at, OpCode::CmpI, body.argument(0), loop->operand(0),
                               {{"predicate", std::string("ne")}});
  return at.create(OpCode::MBarrierArrive, {empty, previous, notFirstStep}, {},
                   {{"wgmma_pending", issued}});
}

/// The rings and the TMA barriers of a loop: before it, or, for a warp-specialized loop, at
/// the func's entry before the producer (warp_specialize.h).
struct Rings {
  std::vector<Value *> slots;
  Value *full = nullptr, *empty = nullptr;
};

Rings createRings(Builder &builder, const LoopSchedule &schedule, bool tma, const Module &module) {
  Rings rings{allocateRings(builder, schedule)};
  if (tma) { // tma.h: the full barriers, then the empty ones (one arrival per reading warp)
    rings.full = createBarriers(builder, schedule.numStages, 1);
    rings.empty = createBarriers(builder, schedule.numStages, moduleWarps(module));
  }
  return rings;
}

/// `cross`: the loop's copies run ahead into the next iteration of its tile loop
/// (cross_tile.h; TMA, not specialized).
void pipelineLoop(const LoopSchedule &schedule, bool tma, bool specialized, const Module &module,
                  const CrossTilePlan *cross) {
  Operation *loop = schedule.loop;
  Block &body = loop->body();
  Operation *yield = body.terminator();
  int numStages = schedule.numStages, distance = numStages - 1;
  Value *lower = loop->operand(0), *upper = loop->operand(1), *step = loop->operand(2);
  Type ivType = lower->type();

  Builder builder;
  builder.setInsertionPoint(loop);
  builder.setLocation(loop->location());
  Rings made;
  if (specialized) { // the producer copies every iteration (warp_specialize.h): no prologue
    Block &entry = loop->parentBlock()->parentOp()->body();
    Builder atEntry;
    atEntry.setInsertionPoint(entry.operations().front().get());
    atEntry.setLocation(loop->location());
    made = createRings(atEntry, schedule, true, module);
    buildProducer(atEntry, schedule, made.slots, made.full, made.empty, module);
  } else if (cross) { // live across the tile loop: its copies continue into the next tile
    Builder atOuter;
    atOuter.setInsertionPoint(cross->outer);
    atOuter.setLocation(loop->location());
    made = createRings(atOuter, schedule, true, module);
  } else {
    made = createRings(builder, schedule, tma, module);
  }
  const std::vector<Value *> &rings = made.slots;
  Value *barriers = made.full, *empty = made.empty;
  // A mixed TMA loop (tma.h) also copies rows of scalars by cp.async: their groups and waits
  // are the cp.async plan's, beside the TMA's mbarriers.
  bool mixed = tma && !std::all_of(schedule.loads.begin(), schedule.loads.end(), copiedByTma);
  // `tmaAt`: where the TMA's copies go when not at `at` (a mixed loop's, after the release).
  auto issue = [&](Builder &at, const Mapping &mapping, Value *slot, Value *inRange,
                   Value *emptyPhase, Builder *tmaAt = nullptr) {
    if (tma)
      issueTmaCopies(tmaAt ? *tmaAt : at, schedule, rings, barriers, mapping, slot, inRange,
                     emptyPhase ? empty : nullptr, emptyPhase, waitAttributes(module));
    if (!tma || mixed)
      issueCopies(at, schedule, rings, mapping, slot, inRange, tma);
  };

  // Plan step 2: iterations 0 .. D-1; `state` ends holding the carried values of iteration D.
  // Their slots are fresh: no wait for a release (the barriers' init ordered earlier uses of
  // the ring's bytes, with its bar.sync). Across tiles, the stages the previous tile did not
  // copy, after their slots' release (beginCrossTile).
  Mapping state;
  for (unsigned carried : schedule.aheadCarried)
    state[body.argument(carried + 1)] = loop->operand(3 + carried);
  CrossTile tile;
  if (cross)
    tile = beginCrossTile(*cross, schedule,
                          [&](Builder &at, const Mapping &mapping, Value *slot, Value *inRange,
                              Value *parity) { issue(at, mapping, slot, inRange, parity); });
  Value *iv = lower;
  for (int j = 0; j < distance && !specialized && !cross; ++j) {
    if (j > 0)
      iv = binary(builder, OpCode::AddI, iv, step);
    Mapping mapping = state;
    mapping[body.argument(0)] = iv;
    Value *inRange = binary(builder, OpCode::CmpI, iv, upper, {{"predicate", std::string("slt")}});
    cloneAhead(builder, schedule, mapping, inRange);
    issue(builder, mapping, constant(builder, j, Type::i32()), inRange, nullptr);
    for (unsigned carried : schedule.aheadCarried)
      state[body.argument(carried + 1)] = mapped(mapping, yield->operand(carried));
  }
  Value *aheadOffset = binary(builder, OpCode::MulI, constant(builder, distance, ivType), step);

  // Plan step 3: the new carried values: the ahead ones, the read slot, [the write slot],
  // [TMA: the read slot's phase parity, [the write slot's empty-barrier parity]].
  std::vector<Value *> operands = loop->operands();
  Mapping ahead;
  for (unsigned carried : specialized ? std::vector<unsigned>{} : schedule.aheadCarried) {
    Value *argument = body.argument(carried + 1);
    operands.push_back(state.at(argument));
    ahead[argument] = body.addArgument(argument->type());
    loop->addResult(argument->type());
  }
  auto carry = [&](Value *init) {
    operands.push_back(init);
    loop->addResult(Type::i32());
    return body.addArgument(Type::i32());
  };
  // Across tiles, each starts where the tiles before left the ring (ringStateAt).
  RingState start{};
  if (cross)
    start = ringStateAt(builder, tile, numStages);
  auto i32 = [&](int64_t value) { return constant(builder, value, Type::i32()); };
  Value *readSlot = carry(cross ? start.readSlot : i32(0));
  unsigned readSlotResult = loop->numResults() - 1;
  Value *writeSlot = specialized ? nullptr : carry(cross ? start.writeSlot : i32(distance));
  Value *phase = tma ? carry(cross ? start.readPhase : i32(0)) : nullptr;
  // A fresh barrier's wait for parity 1 returns at once (the phase "before" the first): the
  // first write of each slot needs no release.
  Value *emptyPhase = tma && !specialized ? carry(cross ? start.emptyPhase : i32(1)) : nullptr;
  loop->setOperands(operands);

  // A rescaled product carried across the back edge moves the step's copies after its last
  // product: they then lead the reads by D - 1 whole steps, none at two stages (each step
  // would wait for its own tiles). Such a loop keeps that product's wait at its back edge
  // (attribute `wgmma_rescaled_wait`, read by wgmma_waits) and its copies after the first.
  bool rescaled = analysis::carriesRescaledProducts(module);
  if (rescaled && distance < 2) {
    loop->setAttr("wgmma_rescaled_wait", int64_t(1));
    rescaled = false;
  }
  // Where iteration k + D's copies go (below), decided on the body as the user wrote it.
  Operation *product =
      analysis::wgmmaPipelining(module) ? firstRingProduct(schedule, rescaled) : nullptr;
  Builder inside;
  inside.setInsertionPoint(body.operations().front().get());
  inside.setLocation(loop->location());
  Operation *barrier = nullptr, *asyncWait = nullptr;
  if (tma) // the slot's bytes landed; no barrier: the copies wait for the slot's release
    inside.create(OpCode::MBarrierWait, {barriers, readSlot, phase}, {}, waitAttributes(module));
  if (!tma || mixed) { // cp.async: every thread's copies of the slot landed, and were seen
    asyncWait = inside.create(OpCode::AsyncWait, {}, {}, {{"pending", int64_t(distance - 1)}});
    barrier = inside.create(OpCode::Barrier, {}, {});
  }
  Operation *release = tma ? releaseSlots(loop, product, empty, readSlot, numStages) : nullptr;

  // Where iteration k + D's copies go. Before step k's product (cp.async: the barrier above
  // orders them after every warp's reads of their slot, last step's). With a wgmma product
  // left in flight across iterations (the module's wgmma_pipeline), right after step k's first
  // product instead: their slot (k - 1) mod S is the one step k - 1's product read, so they
  // must wait for that product in every warp, and the loop-top barrier cannot (it would drain
  // step k - 1's product before step k's is issued). cp.async: membar puts a second barrier
  // before them that waits for step k - 1's group only (`wgmma.wait_group 1`: step k's reads
  // slot k mod S, never the one overwritten), and places the loop-top barrier itself (read
  // after the copies of slot k landed), leaving the previous product in flight. TMA: each
  // warp releases slot k - 1 after its wait_group 1 (releaseSlots) and the issuing thread
  // waits for the release. The prefetch distance stays D: in the old order too the copies
  // went out only once the previous product was done (the back edge waited for it)
  // (docs/perf/wgmma_across_iterations.md).
  // A mixed loop with a product in flight issues its cp.async copies at the loop top, right
  // after their wait (their slot was read by plain loads last step, not by a product), and
  // the TMA's after the release: membar then puts one barrier before the cp.async copies
  // (last step's reads of their slot; this step's copies landed), leaving the products in
  // flight. Issued after the product, they would cost a second barrier per step.
  Builder tmaAt;
  bool tmaApart = mixed && product && !specialized;
  if (tmaApart) {
    tmaAt.setInsertionPointAfter(release);
    tmaAt.setLocation(loop->location());
  }
  if (!specialized) {
    Builder issueAt;
    if (product) {
      if (barrier)
        barrier->erase();
      issueAt.setInsertionPointAfter(mixed ? asyncWait : tma ? release : product);
    } else if (barrier) {
      issueAt.setInsertionPointAfter(barrier);
    } else {
      issueAt.setInsertionPointAfter(body.operations().front().get()); // the full wait
    }
    issueAt.setLocation(loop->location());
    Value *aheadIv = binary(issueAt, OpCode::AddI, body.argument(0), aheadOffset);
    if (cross) { // past this tile's end, the next tile's first steps
      Mapping across;
      Value *inRange = aheadAcrossTiles(issueAt, tile, schedule, aheadIv, across);
      cloneAheadOps(issueAt, cross->aheadOps, across, inRange);
      issue(issueAt, across, writeSlot, inRange, emptyPhase);
    } else {
      ahead[body.argument(0)] = aheadIv;
      Value *inRange =
          binary(issueAt, OpCode::CmpI, aheadIv, upper, {{"predicate", std::string("slt")}});
      cloneAhead(issueAt, schedule, ahead, inRange);
      issue(issueAt, ahead, writeSlot, inRange, emptyPhase, tmaApart ? &tmaAt : nullptr);
    }
  }

  for (size_t i = 0; i < schedule.loads.size(); ++i) {
    const PipelinedLoad &pipelined = schedule.loads[i];
    Operation *load = pipelined.load;
    for (Operation *convert : pipelined.conversions) { // read back in each user's layout
      readSlotInstead(convert, convert->result(), rings[i], readSlot, load->location());
      convert->erase();
    }
    if (pipelined.reads.empty() && pipelined.conversions.empty()) // in the load's layout
      readSlotInstead(load, load->result(), rings[i], readSlot, load->location());
    for (const OperandRead &operand : pipelined.reads) {
      std::map<std::string, Attribute> attrs;
      if (operand.transposed)
        attrs["order"] = std::vector<int64_t>{1, 0};
      readSlotInstead(operand.convert, operand.convert->result(), rings[i], readSlot,
                      load->location(), std::move(attrs));
      operand.convert->erase();
    }
    for (Operation *trans : pipelined.transposes)
      trans->erase();
    load->erase();
  }

  Builder atYield;
  atYield.setInsertionPoint(yield);
  std::vector<Value *> yielded = yield->operands();
  if (!specialized)
    for (unsigned carried : schedule.aheadCarried)
      yielded.push_back(mapped(ahead, yield->operand(carried)));
  Value *nextRead = nextSlot(atYield, readSlot, numStages);
  yielded.push_back(nextRead);
  Value *nextWrite = writeSlot ? nextSlot(atYield, writeSlot, numStages) : nullptr;
  if (writeSlot)
    yielded.push_back(nextWrite);
  if (tma) // the phase flips when the read slot wraps around
    yielded.push_back(nextPhase(atYield, phase, nextRead));
  if (emptyPhase) // and the write slot's, when it does
    yielded.push_back(nextPhase(atYield, emptyPhase, nextWrite));
  yield->setOperands(yielded);

  // Plan step 4.
  Builder after;
  after.setInsertionPointAfter(loop);
  if (cross) {
    // With products in flight, step k released step k - 1's slot: the last step's is released
    // here (the loop's exit waited for its product), before the next tile's copies need it.
    if (product) {
      Value *last = loop->result(readSlotResult); // (g + n) % S: the slot after the last read
      Value *wraps = binary(after, OpCode::CmpI, last, constant(after, 0, Type::i32()),
                            {{"predicate", std::string("eq")}});
      Value *previous = binary(after, OpCode::SubI, last, constant(after, 1, Type::i32()));
      previous =
          after
              .create(OpCode::Select,
                      {wraps, constant(after, numStages - 1, Type::i32()), previous}, {Type::i32()})
              ->result();
      Value *ran = binary(after, OpCode::CmpI, tile.iterations, constant(after, 0, Type::i32()),
                          {{"predicate", std::string("sgt")}});
      after.create(OpCode::MBarrierArrive, {empty, previous, ran}, {},
                   {{"wgmma_pending", int64_t(0)}});
    }
    Builder afterOuter;
    afterOuter.setInsertionPointAfter(cross->outer);
    afterOuter.create(OpCode::MBarrierInval, {barriers}, {});
    afterOuter.create(OpCode::MBarrierInval, {empty}, {});
  } else {
    if (!tma || mixed)
      after.create(OpCode::AsyncWait, {}, {}, {{"pending", int64_t(0)}});
    if (tma) {
      after.create(OpCode::MBarrierInval, {barriers}, {});
      after.create(OpCode::MBarrierInval, {empty}, {});
    }
  }
}

} // namespace

void pipelineLoops(Module &module) {
  for (Operation *func : module.functions()) {
    std::vector<Operation *> loops;
    func->walk([&](Operation *op) {
      if (op->code() == OpCode::For)
        loops.push_back(op);
    });
    // A func specializes one loop: one that asks for it itself (tl.range(warp_specialize=
    // True)) goes before those the module's knob asks for (e.g. attention's long unmasked
    // loop before its short masked one); otherwise program order.
    std::stable_partition(loops.begin(), loops.end(), [](Operation *loop) {
      return loop->hasAttr("warp_specialize") && loop->flagAttr("warp_specialize");
    });
    for (Operation *loop : loops) {
      int stages = requestedStages(*loop, module);
      bool tmaAsked = module.intAttrOr("tma", 0) == 1;
      LoopSchedule schedule = scheduleLoop(loop, stages, tmaAsked);
      bool tma = schedule.isPipelined() && tmaRejection(schedule, module).empty();
      if (tmaAsked && !tma) // the cp.async plan, with its own conditions on the loads
        schedule = scheduleLoop(loop, stages, false);
      // A loop that asks for it (or every loop, the module's warp_specialize) gets a producer
      // warpgroup where specializationRejection accepts it, else the plan above. Neither it
      // nor the copies across tiles take a mixed loop's cp.async rows (tma.h).
      bool allTma = tma && std::all_of(schedule.loads.begin(), schedule.loads.end(), copiedByTma);
      bool specialized = allTma && specializationRejection(schedule, module).empty();
      // A loop in a tile loop that asks for it (tl.range(flatten=True)) copies across tiles.
      CrossTilePlan cross;
      Operation *outer = loop->parentOp();
      if (allTma && !specialized && outer && outer->hasAttr("flatten") &&
          outer->intAttr("flatten") == 1)
        cross = crossTilePlan(schedule);
      if (schedule.isPipelined())
        pipelineLoop(schedule, tma, specialized, module, cross.outer ? &cross : nullptr);
    }
    dropUnusedTensorMaps(*func, module.intAttrOr("tma", 0) == 1);
  }
}

TESSERA_REGISTER_PASS(pipeline, "pipeline",
                      "Software-pipeline the loads that feed dots: num_stages-deep cp.async rings "
                      "in shared memory, prologue, predicated tail",
                      pipelineLoops);

/// Test-only: writes each loop's stage table (LoopSchedule::str) as its attribute
/// `pipeline_schedule`, for the text tests.
void printPipelineSchedules(Module &module) {
  for (Operation *func : module.functions())
    func->walk([&](Operation *op) {
      if (op->code() == OpCode::For)
        op->setAttr("pipeline_schedule", scheduleLoop(op, requestedStages(*op, module)).str());
    });
}

TESSERA_REGISTER_PASS(test_pipeline_schedule, "test_pipeline_schedule",
                      "Test only: attach each loop's software-pipelining stage table as an "
                      "attribute",
                      printPipelineSchedules);

} // namespace tessera::transforms::pipeline
