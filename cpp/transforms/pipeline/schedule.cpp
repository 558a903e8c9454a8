// scheduleLoop: which loads of a `for` body the pipeliner turns into cp.async rings, and the
// stage-0 slice that computes their operands ahead of time.
//
// Plan:
// 1. Candidate loads: top-level 2-D loads of the body. When every user converts the tile into
//    #mma dot-operand layouts (directly, or through a transpose: attention's Kᵀ, and the
//    backward's Q and dO, read both ways), local_loads read the ring straight into the mma
//    fragments, one per conversion; otherwise one reads the tile back in the load's own
//    layout (memory-bound loops: norms), masked-off lanes zero (no `other`, or zero), with runs of
//    >= 4 bytes per thread (cp.async copies 4, 8 or 16 bytes).
// 2. Their operands' backward slice within the body: pure ops without regions, the induction
//    variable, and carried values, whose updates (the yielded values) join the slice, so the
//    slice can run numStages - 1 iterations ahead on its own copy of those values.
#include "transforms/pipeline/schedule.h"

#include "analysis/axis_info.h"
#include "analysis/shared_footprint.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

bool isZeroConstant(Value *value) {
  Operation *def = value->definingOp();
  if (def && def->code() == OpCode::Splat)
    def = def->operand(0)->definingOp();
  // A float cast of +0 is +0 in every format, fp8 too (code 0): the folder leaves casts into
  // fp8 in place (an fp8 load's `other=0`).
  while (def && (def->code() == OpCode::TruncF || def->code() == OpCode::ExtF))
    def = def->operand(0)->definingOp();
  if (!def || def->code() != OpCode::Constant)
    return false;
  const Attribute &attr = def->attr("value");
  if (const double *real = std::get_if<double>(&attr))
    return *real == 0.0 && !std::signbit(*real);
  if (const int64_t *integer = std::get_if<int64_t>(&attr))
    return *integer == 0;
  return false;
}

bool isOperandConversion(const Operation *user) {
  if (user->code() != OpCode::ConvertLayout)
    return false;
  const auto *operand =
      dynamic_cast<const DotOperandEncoding *>(user->result()->type().encoding().get());
  return operand && operand->getMmaParent();
}

/// The load's users as conversions into #mma dot-operand layouts, directly or through `trans`
/// ops whose users all are; false (and `out` cleared) when some user is anything else.
bool collectOperandReads(Operation *load, PipelinedLoad &out) {
  std::set<Operation *> seen;
  for (Operation *user : load->result()->users()) {
    if (!seen.insert(user).second)
      continue;
    if (isOperandConversion(user)) {
      out.reads.push_back({user, false});
      continue;
    }
    bool transposes = user->code() == OpCode::Trans &&
                      user->arrayAttr("order") == std::vector<int64_t>{1, 0} &&
                      user->result()->hasUses();
    for (Operation *convert : transposes ? user->result()->users() : std::vector<Operation *>{})
      transposes = transposes && isOperandConversion(convert);
    if (!transposes) {
      out.reads.clear();
      out.transposes.clear();
      return false;
    }
    out.transposes.push_back(user);
    std::set<Operation *> converts(user->result()->users().begin(), user->result()->users().end());
    for (Operation *convert : converts)
      out.reads.push_back({convert, true});
  }
  return !out.reads.empty();
}

/// A 1-D load whose users all are layout conversions: each reads the ring in its own layout
/// (the loop-top barrier already orders the copies of every thread before the reads), so the
/// conversions' round trips through shared memory and their barriers go. Else (other users)
/// `out.conversions` stays empty and the tile is read back in the load's layout.
void collectConversions(Operation *load, PipelinedLoad &out) {
  std::set<Operation *> converts;
  for (Operation *user : load->result()->users()) {
    if (user->code() != OpCode::ConvertLayout)
      return;
    converts.insert(user);
  }
  out.conversions.assign(converts.begin(), converts.end());
}

/// Whether every dot reading the tile has its K dim where the tile is contiguous (`fastest`,
/// in the load's dims): A's K is dim 1, B's dim 0, swapped when a trans is read.
bool contiguousAlongK(const PipelinedLoad &load, int fastest) {
  return std::all_of(load.reads.begin(), load.reads.end(), [&](const OperandRead &read) {
    const auto &operand =
        static_cast<const DotOperandEncoding &>(*read.convert->result()->type().encoding());
    int kDim = operand.getOpIdx() == 0 ? 1 : 0;
    return (read.transposed ? 1 - kDim : kDim) == fastest;
  });
}

// Plan step 1. Returns why not, or "". `tma`: a 2-D descriptor load carrying its tensor map
// will be copied by the TMA unit, which fills out-of-bounds elements itself (zeros or NaN, as
// the map says) and copies whole boxes: neither the zero fill nor the per-thread runs that
// cp.async needs apply (a ragged shape, not a multiple of 16, leaves runs of one element).
std::string checkLoad(Operation *load, const analysis::AxisInfoAnalysis &axisInfo, bool tma,
                      PipelinedLoad &out) {
  const Type &type = load->result()->type();
  if ((type.rank() != 1 && type.rank() != 2) || !type.encoding())
    return "not a 1-D or 2-D tile with a layout";
  bool byTma = tma && type.rank() == 2 && load->hasAttr("tma");
  if (!byTma && load->numOperands() >= 3 && !isZeroConstant(load->operand(2)))
    return "masked-off lanes are not zero";
  if (!load->result()->hasUses())
    return "unused";
  int elementBytes = type.bitWidth() / 8;
  if (!byTma && analysis::accessVectorWidth(axisInfo, *load) * elementBytes < 4)
    return "runs of less than 4 bytes per thread (cp.async copies 4, 8 or 16)";
  LinearLayout layout = type.encoding()->toLinearLayout(type.shape());
  // The slot's contiguous dim: a descriptor's last dim is (its stride is the constant 1);
  // the layout's fastest dim need not be where a ragged shape left one element per thread
  // (the register bits then walk the rows).
  int fastest = byTma ? type.rank() - 1 : analysis::fastestDim(layout);
  out.load = load;
  if (type.rank() == 1) { // a row of scalars (attention's lse): read back where it is converted
    // Each owner thread copies all the elements its layout gives it (the threads holding
    // duplicates copy nothing: lowerAsyncCopy): a layout of many registers per thread (a load
    // already rematerialized in a slice of #mma: 16 per thread at BLOCK_M = 64) issues that
    // many copies per step, measured slower than loading the row in the loop when every
    // holder still copied (docs/perf/pass_decisions.md).
    if ((layout.hasInDim(kRegisterDim) ? layout.getInDimSize(kRegisterDim) : 1) * elementBytes > 16)
      return "a 1-D tile of more than 16 bytes per thread (each thread would copy them all)";
    collectConversions(load, out);
    out.slotEncoding = std::make_shared<const SharedEncoding>(1, 1, 1, std::vector<int>{0});
    return "";
  }
  if (collectOperandReads(load, out)) {
    auto wgmmaReads =
        std::count_if(out.reads.begin(), out.reads.end(), [](const OperandRead &read) {
          return isWgmmaOperand(read.convert->result()->type().encoding().get());
        });
    bool wgmma = wgmmaReads == static_cast<std::ptrdiff_t>(out.reads.size());
    if (wgmma && elementBytes == 1 && !contiguousAlongK(out, fastest)) {
      // wgmma reads 8-bit operands K-major only (PTX ISA: no transpose for .e4m3/.e5m2): a
      // copy cannot turn an M/N-contiguous tile around, so it is loaded in the loop and
      // materialize_wgmma_operands stores it K-major (Triton does the same).
      out.reads.clear();
      out.transposes.clear();
      return "an 8-bit wgmma operand contiguous along M or N (wgmma reads it K-major)";
    }
    if (wgmmaReads > 0 && !wgmma) {
      // A tile read by a wgmma product and by an mma.sync one (e.g. a product of fewer rows
      // than a warpgroup's 64): no one slot layout serves wgmma's descriptor swizzles and
      // ldmatrix at every row width, so it is loaded in the loop and each product stages
      // or converts it as it needs (materialize_wgmma_operands).
      out.reads.clear();
      out.transposes.clear();
      return "a tile read by both wgmma and mma.sync products (one ring layout cannot serve both)";
    }
    if (wgmma) // wgmma reads the slot through a descriptor: its swizzle modes
      out.slotEncoding = wgmmaSharedEncoding(type.shape(), {fastest, 1 - fastest}, elementBytes);
    if (!out.slotEncoding) // ldmatrix reads of either orientation: swizzled
      out.slotEncoding =
          dotOperandSharedEncoding(type.shape(), {fastest, 1 - fastest}, elementBytes);
  } else // every thread reads back the bytes it copied: the copies' conflict-free pattern
    out.slotEncoding =
        std::make_shared<const SharedEncoding>(1, 1, 1, std::vector<int>{fastest, 1 - fastest});
  return "";
}

// Plan step 2. Returns why not, or "".
std::string collectAheadSlice(LoopSchedule &schedule) {
  Operation *loop = schedule.loop;
  Block &body = loop->body();
  std::set<Operation *> ops;
  std::set<unsigned> carried;
  std::vector<Value *> worklist;
  for (const PipelinedLoad &load : schedule.loads)
    for (Value *operand : load.load->operands())
      worklist.push_back(operand);
  while (!worklist.empty()) {
    Value *value = worklist.back();
    worklist.pop_back();
    if (Block *owner = value->ownerBlock()) {
      if (owner != &body || value->index() == 0)
        continue; // defined outside the loop, or the induction variable
      if (carried.insert(value->index() - 1).second)
        worklist.push_back(body.terminator()->operand(value->index() - 1));
      continue;
    }
    Operation *def = value->definingOp();
    if (!def->isInside(loop))
      continue; // loop-invariant
    if (def->parentBlock() != &body)
      return "an address computed inside a nested region";
    // A scalar read that the address depends on (an index list, as block-sparse attention's)
    // runs ahead too: its clones are predicated on the iteration being in range. Like the
    // tiles' copies, it assumes no store of the loop writes what it reads.
    bool scalarRead = def->code() == OpCode::Load && !def->result()->type().isTensor();
    if ((!def->hasTrait(trait::PURE) && !scalarRead) || def->numRegions() != 0)
      return std::string("an address computed by '") + def->name() + "', which has effects";
    if (ops.insert(def).second)
      for (Value *operand : def->operands())
        worklist.push_back(operand);
  }
  for (auto &op : body.operations())
    if (ops.count(op.get()))
      schedule.aheadOps.push_back(op.get());
  schedule.aheadCarried.assign(carried.begin(), carried.end());
  return "";
}

} // namespace

int requestedStages(const Operation &loop, const Module &module) {
  if (loop.hasAttr("num_stages"))
    return static_cast<int>(loop.intAttr("num_stages"));
  return static_cast<int>(module.intAttrOr("num_stages", 1));
}

LoopSchedule scheduleLoop(Operation *loop, int numStages, bool tma) {
  LoopSchedule schedule;
  schedule.loop = loop;
  schedule.numStages = numStages;
  if (numStages < 2) {
    schedule.reason = "num_stages < 2";
    return schedule;
  }
  if (loop->operand(0)->type() != loop->operand(1)->type() ||
      loop->operand(0)->type() != loop->operand(2)->type()) {
    schedule.reason = "bounds and step of different integer types";
    return schedule;
  }
  Operation *func = loop;
  while (func->parentOp())
    func = func->parentOp();
  analysis::AxisInfoAnalysis axisInfo(func);
  std::vector<std::string> skipped;
  for (auto &op : loop->body().operations()) {
    if (op->code() != OpCode::Load)
      continue;
    PipelinedLoad load{};
    std::string why = checkLoad(op.get(), axisInfo, tma, load);
    if (why.empty())
      schedule.loads.push_back(std::move(load));
    else
      skipped.push_back(why);
  }
  if (schedule.loads.empty()) {
    schedule.reason = "no load that feeds a dot can be pipelined";
    for (const std::string &why : skipped)
      schedule.reason += "; " + why;
    return schedule;
  }
  schedule.reason = collectAheadSlice(schedule);
  return schedule;
}

std::string LoopSchedule::str() const {
  std::ostringstream os;
  if (!isPipelined()) {
    os << "not pipelined: " << reason << "\n";
    return os.str();
  }
  std::set<Operation *> ahead(aheadOps.begin(), aheadOps.end());
  int index = 0;
  for (auto &op : loop->body().operations()) {
    auto load = std::find_if(loads.begin(), loads.end(),
                             [&](const PipelinedLoad &l) { return l.load == op.get(); });
    bool early = ahead.count(op.get()) || load != loads.end();
    os << "stage " << (early ? 0 : numStages - 1) << ": #" << index++ << " " << op->name();
    if (load != loads.end()) {
      const std::vector<int64_t> &shape = op->result()->type().shape();
      os << " -> ring " << (load - loads.begin()) << " (" << numStages << " x " << shape[0] << "x"
         << shape[1] << "x" << op->result()->type().elementType().str() << ")";
    }
    os << "\n";
  }
  for (unsigned carried : aheadCarried)
    os << "ahead: carried value " << carried << "\n";
  return os.str();
}

} // namespace tessera::transforms::pipeline
