// The TMA variant of the pipeliner (see tma.h). With S stages the loop becomes
//
//   %ring = local_alloc : () -> tensor<S x 128x64xf16, #shared<...>>
//   %bars = local_alloc : () -> tensor<S x i64, #shared<...>>
//   mbarrier_init %bars {count = 1}
//   (for j in 0 .. S-2: mbarrier_expect_tx %bars, j, (iteration j in range) {bytes = B};
//    tma_load %map, %ring, j, %bars, (in range), %row_j, %col_j)
//   for %k ... iter(..., %r = 0, %w = S-1, %phase = 0) {
//     mbarrier_wait %bars, %r, %phase        // stage r's bytes landed
//     barrier                                // every warp is done reading slot w
//     (expect_tx + tma_load of iteration k + S-1 into slot w)
//     ... local_load %ring, %r ...
//     yield ..., (r+1) % S, (w+1) % S, phase ^ ((r+1) % S == 0) }
//   mbarrier_inval %bars
//
// One arrival (thread 0's expect_tx) and B bytes complete a phase; a stage past the end is
// predicated off and never waited for. The phase a wait expects flips each time the read slot
// wraps around, as the barrier's own phase does after each of its stages completes.
#include "transforms/pipeline/tma.h"

#include "analysis/allocation.h"
#include "analysis/shared_footprint.h"
#include "layout/swizzled_shared.h"

#include <algorithm>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

Value *mappedValue(const std::map<Value *, Value *> &mapping, Value *value) {
  auto it = mapping.find(value);
  return it == mapping.end() ? value : it->second;
}

int64_t tileBytes(const Operation &load) {
  const Type &type = load.result()->type();
  int64_t elements = 1;
  for (int64_t size : type.shape())
    elements *= size;
  return elements * type.bitWidth() / 8;
}

} // namespace

bool copiedByTma(const PipelinedLoad &pipelined) {
  return pipelined.load->hasAttr("tma") && pipelined.load->result()->type().rank() == 2;
}

std::string tmaRejection(const LoopSchedule &schedule, const Module &module) {
  if (module.intAttrOr("tma", 0) != 1)
    return "TMA not asked for";
  if (std::none_of(schedule.loads.begin(), schedule.loads.end(), copiedByTma))
    return "no pipelined load is a 2-D descriptor load";
  for (const PipelinedLoad &pipelined : schedule.loads) {
    const Operation &load = *pipelined.load;
    const Type &type = load.result()->type();
    if (!copiedByTma(pipelined)) {
      if (type.rank() != 1)
        return "a pipelined 2-D load is not a descriptor load";
      continue; // a row of scalars beside the tiles: copied by cp.async (tma.h)
    }
    const auto &encoding = static_cast<const SharedEncoding &>(*pipelined.slotEncoding);
    int elementBytes = type.bitWidth() / 8;
    SharedTileLayout tile = encoding.tileFor(type.shape());
    int64_t rowBytes = type.shape()[1] * elementBytes;
    if (tile.order.size() != 2 || tile.order[0] != 1 ||
        wgmmaSwizzleBytes(tile, elementBytes) != std::min<int64_t>(128, rowBytes) ||
        rowBytes < 32 || type.shape()[0] > 256)
      return "a slot is not in the wgmma swizzle the tensor map encodes: " + tile.str();
    // The TMA swizzles by absolute shared address bits: each slot must start where the
    // pattern does (8 rows of the swizzle span), which whole rings of >= 1 KiB guarantee
    // (allocate_shared puts them on 1 KiB boundaries, analysis/allocation.h).
    if (type.shape()[0] % 8 != 0 ||
        tileBytes(load) * schedule.numStages < analysis::kWgmmaTileAlignment)
      return "a ring under 1 KiB or a tile of fewer than 8-row multiples: slots would not start "
             "on the swizzle pattern";
  }
  return "";
}

std::map<std::string, Attribute> waitAttributes(const Module &module) {
  if (module.intAttrOr("debug", 0) != 1)
    return {};
  return {{"timeout_ns", kDebugWaitTimeoutNs}};
}

Value *createBarriers(Builder &builder, int numStages, int64_t arrivals) {
  auto encoding = std::make_shared<SharedEncoding>(1, 1, 1, std::vector<int>{0});
  int64_t count = 1; // shared tiles have power-of-two extents: spare barriers stay unused
  while (count < numStages)
    count *= 2;
  Type type = Type::tensor({count}, Type::i64(), encoding);
  Value *barriers = builder.create(OpCode::LocalAlloc, {}, {type})->result();
  builder.create(OpCode::MBarrierInit, {barriers}, {}, {{"count", arrivals}});
  return barriers;
}

Value *nextPhase(Builder &builder, Value *phase, Value *nextSlot) {
  Value *wraps = builder
                     .create(OpCode::CmpI, {nextSlot, builder.constantInt(0, Type::i32())},
                             {Type::i1()}, {{"predicate", std::string("eq")}})
                     ->result();
  Value *flip = builder.create(OpCode::ExtUI, {wraps}, {Type::i32()})->result();
  return builder.create(OpCode::XOrI, {phase, flip}, {Type::i32()})->result();
}

int64_t moduleWarps(const Module &module) { return module.intAttrOr("num_warps", 4); }

void issueTmaCopies(Builder &builder, const LoopSchedule &schedule,
                    const std::vector<Value *> &rings, Value *barriers,
                    const std::map<Value *, Value *> &mapping, Value *slot, Value *inRange,
                    Value *empty, Value *emptyPhase, std::map<std::string, Attribute> waitAttrs) {
  if (empty)
    builder.create(OpCode::MBarrierWait, {empty, slot, emptyPhase, inRange}, {},
                   std::move(waitAttrs));
  int64_t bytes = 0;
  for (const PipelinedLoad &pipelined : schedule.loads)
    bytes += copiedByTma(pipelined) ? tileBytes(*pipelined.load) : 0;
  builder.create(OpCode::MBarrierExpectTx, {barriers, slot, inRange}, {}, {{"bytes", bytes}});
  for (size_t i = 0; i < schedule.loads.size(); ++i) {
    if (!copiedByTma(schedule.loads[i]))
      continue; // the cp.async companions (issueCopies)
    Operation *load = schedule.loads[i].load;
    std::vector<Value *> operands{mappedValue(mapping, load->operand(3)), rings[i], slot, barriers,
                                  inRange};
    for (unsigned c = 4; c < load->numOperands(); ++c)
      operands.push_back(mappedValue(mapping, load->operand(c)));
    std::map<std::string, Attribute> attrs;
    if (empty)
      attrs["released"] = int64_t(1);
    builder.create(OpCode::TmaLoad, operands, {}, std::move(attrs))->setLocation(load->location());
  }
}

} // namespace tessera::transforms::pipeline
