// The producer of a warp-specialized TMA loop (see warp_specialize.h): which loops qualify,
// and the producer's region, a scalar copy of what the copies need.
#include "transforms/pipeline/warp_specialize.h"

#include "transforms/pipeline/tma.h"

#include <map>
#include <set>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

/// What the producer recomputes: the ops of the func's top level and of the loop body (each
/// in its block's order) that the copies' operands and the loop bounds depend on, and the
/// loop-carried values among them (carried by the producer's loop too).
struct ProducerSlice {
  std::set<Operation *> outside, inside;
  std::set<unsigned> carried;
  std::string reason;
};

/// Scalar work a producer thread may redo: no tensors, no memory, no regions; and a device
/// tensor map (tl.make_tensor_descriptor: global_scratch + tensormap_create), which the
/// producer writes again into a scratch slot of its own (freshSlots): the consumers' issuer
/// may still use the original (another loop's copies) and rewriting it would race them.
bool recomputable(const Operation &op) {
  if (op.code() == OpCode::GlobalScratch || op.code() == OpCode::TensorMapCreate)
    return true;
  if (op.numRegions() > 0 || op.code() == OpCode::InlineAsm)
    return false;
  for (const auto &result : op.results())
    if (result->type().isTensor())
      return false;
  return op.code() == OpCode::ProgramId || op.code() == OpCode::NumPrograms ||
         op.code() == OpCode::Constant || op.hasTrait(trait::PURE);
}

ProducerSlice sliceOf(const LoopSchedule &schedule) {
  ProducerSlice slice;
  Operation *loop = schedule.loop;
  Block &body = loop->body();
  Block *funcBody = loop->parentBlock();
  std::vector<Value *> work{loop->operand(0), loop->operand(1), loop->operand(2)};
  for (const PipelinedLoad &pipelined : schedule.loads)
    for (unsigned i = 3; i < pipelined.load->numOperands(); ++i) // tensor map, coordinates
      work.push_back(pipelined.load->operand(i));
  std::set<Value *> seen;
  while (!work.empty() && slice.reason.empty()) {
    Value *value = work.back();
    work.pop_back();
    if (!seen.insert(value).second)
      continue;
    Operation *def = value->definingOp();
    if (!def) { // a block argument: the kernel's, the induction variable or a carried value
      if (value->ownerBlock() == funcBody)
        continue;
      if (value->ownerBlock() != &body) {
        slice.reason = "a box coordinate depends on a block argument of a nested region";
        continue;
      }
      unsigned index = value->index();
      if (index > 0 && slice.carried.insert(index - 1).second) {
        work.push_back(body.terminator()->operand(index - 1));
        work.push_back(loop->operand(3 + index - 1));
      }
      continue;
    }
    bool inLoop = def->parentBlock() == &body;
    if (!inLoop && def->parentBlock() != funcBody) {
      slice.reason = "a box coordinate is computed inside a nested region";
      continue;
    }
    if (!recomputable(*def)) {
      slice.reason = std::string("a box coordinate or loop bound needs '") + def->name() +
                     "' (the producer recomputes only program ids, kernel arguments and "
                     "scalar arithmetic)";
      continue;
    }
    (inLoop ? slice.inside : slice.outside).insert(def);
    for (Value *operand : def->operands())
      work.push_back(operand);
  }
  return slice;
}

Value *mappedValue(const std::map<Value *, Value *> &mapping, Value *value) {
  auto it = mapping.find(value);
  return it == mapping.end() ? value : it->second;
}

/// Moves each global_scratch the producer cloned (in `region`) to a new 128-byte slot past
/// the func's others: the producer's map has its own bytes, written and fenced by the
/// producer's issuing thread before its copies read it (one thread's program order, as for
/// the consumers' maps). dropUnusedDeviceTensorMaps packs the slots afterwards.
void freshSlots(Block &region, Operation &func) {
  constexpr int64_t kMapBytes = 128;
  for (auto &op : region.operations()) {
    if (op->code() != OpCode::GlobalScratch)
      continue;
    int64_t end = func.intAttr("global_scratch");
    op->setAttr("offset", end);
    func.setAttr("global_scratch", end + kMapBytes);
  }
}

/// Clones the ops of `block` that are in `ops`, in block order, at `builder`; `mapping` maps
/// the originals' values to the clones'.
void cloneInOrder(Builder &builder, Block &block, const std::set<Operation *> &ops,
                  std::map<Value *, Value *> &mapping) {
  for (auto &op : block.operations())
    if (ops.count(op.get()))
      builder.insert(op->clone(mapping));
}

} // namespace

int64_t consumerRegisters(int64_t consumerWarps) {
  int64_t left = (65536 - 4 * 32 * kProducerRegisters) / (consumerWarps * 32);
  return std::min<int64_t>(256, left / 8 * 8);
}

std::string specializationRejection(const LoopSchedule &schedule, const Module &module) {
  Operation *loop = schedule.loop;
  bool asked = module.intAttrOr("warp_specialize", 0) == 1 ||
               (loop->hasAttr("warp_specialize") && loop->flagAttr("warp_specialize"));
  if (!asked)
    return "warp specialization not asked for";
  Operation *func = loop->parentOp();
  if (!func || func->code() != OpCode::Func)
    return "the loop is not at the top level of its func (the producer starts at kernel entry)";
  bool taken = false;
  func->walk([&](Operation *op) { taken = taken || op->code() == OpCode::WarpSpecialize; });
  if (taken)
    return "another loop of the func is specialized already";
  int64_t warps = moduleWarps(module);
  if (warps % 4 != 0 || warps > 16)
    return "num_warps must be 4, 8 or 16 (whole consumer warpgroups, and room for the "
           "producer's 4 warps in 1024 threads)";
  return sliceOf(schedule).reason;
}

void buildProducer(Builder &builder, const LoopSchedule &schedule,
                   const std::vector<Value *> &rings, Value *full, Value *empty,
                   const Module &module) {
  Operation *loop = schedule.loop;
  Block &body = loop->body();
  ProducerSlice slice = sliceOf(schedule);
  int64_t warps = moduleWarps(module);
  Operation *producer = builder.create(OpCode::WarpSpecialize, {}, {},
                                       {{"producer_warps", int64_t(4)},
                                        {"producer_registers", kProducerRegisters},
                                        {"consumer_registers", consumerRegisters(warps)}},
                                       1);
  Block &region = producer->body();
  Builder in;
  in.setInsertionPointToEnd(&region);
  in.setLocation(loop->location());
  std::map<Value *, Value *> mapping;
  cloneInOrder(in, *loop->parentBlock(), slice.outside, mapping);
  freshSlots(region, *loop->parentOp());

  // The loop over every iteration: the slice's carried values, the write slot, the parity of
  // the empty barrier's phase that releases it (1 first: a fresh barrier's "previous" phase).
  std::vector<Value *> operands{mappedValue(mapping, loop->operand(0)),
                                mappedValue(mapping, loop->operand(1)),
                                mappedValue(mapping, loop->operand(2))};
  std::vector<Type> types;
  for (unsigned carried : slice.carried) {
    operands.push_back(mappedValue(mapping, loop->operand(3 + carried)));
    types.push_back(loop->operand(3 + carried)->type());
  }
  operands.push_back(in.constantInt(0, Type::i32()));
  operands.push_back(in.constantInt(1, Type::i32()));
  types.push_back(Type::i32());
  types.push_back(Type::i32());
  Operation *copies = in.create(OpCode::For, operands, types, {}, 1);
  Block &steps = copies->body();
  mapping[body.argument(0)] = steps.addArgument(body.argument(0)->type());
  for (unsigned carried : slice.carried)
    mapping[body.argument(carried + 1)] = steps.addArgument(body.argument(carried + 1)->type());
  Value *slot = steps.addArgument(Type::i32());
  Value *phase = steps.addArgument(Type::i32());

  Builder step;
  step.setInsertionPointToEnd(&steps);
  step.setLocation(loop->location());
  cloneInOrder(step, body, slice.inside, mapping);
  Value *always = step.constantInt(1, Type::i1());
  issueTmaCopies(step, schedule, rings, full, mapping, slot, always, empty, phase,
                 waitAttributes(module));
  std::vector<Value *> yielded;
  for (unsigned carried : slice.carried)
    yielded.push_back(mappedValue(mapping, body.terminator()->operand(carried)));
  Value *next =
      step.create(OpCode::AddI, {slot, step.constantInt(1, Type::i32())}, {Type::i32()})->result();
  Value *wraps =
      step.create(OpCode::CmpI, {next, step.constantInt(schedule.numStages, Type::i32())},
                  {Type::i1()}, {{"predicate", std::string("eq")}})
          ->result();
  next = step.create(OpCode::Select, {wraps, step.constantInt(0, Type::i32()), next}, {Type::i32()})
             ->result();
  yielded.push_back(next);
  yielded.push_back(nextPhase(step, phase, next));
  step.create(OpCode::Yield, yielded, {});
  in.create(OpCode::Yield, {}, {});
}

} // namespace tessera::transforms::pipeline
