// Lowering of atomic_rmw and atomic_cas: one LLVM atomicrmw / cmpxchg per element, issued once.
//
// Plan per op:
//  1. Which threads issue: as stores (lower_memory.cpp), only the first owner of each element
//     (duplicate lanes, warps and registers skip it), under its mask; a scalar op is issued by
//     thread 0 alone.
//  2. Ordering: LLVM 22's NVPTX backend prints every atomicrmw as a relaxed, gpu-scope `atom`
//     (it drops the ordering and syncscope; cmpxchg keeps both). So atomic_rmw is a monotonic
//     atomicrmw between fences of the op's scope: `fence.release` before it for release and
//     acq_rel, `fence.acquire` after it for acquire and acq_rel (the PTX memory model's release
//     and acquire patterns), one pair per op rather than per element. Scope "sys" needs the
//     atom itself at system scope: a cmpxchg loop (cmpxchg keeps its syncscope). atomic_cas is
//     a cmpxchg with the op's ordering and scope.
//     fp16 adds of two consecutive, 4-byte aligned elements under one mask become one
//     atom.add.noftz.f16x2 (inline PTX: LLVM expands a <2 x half> atomicrmw into a CAS loop).
//  3. Result: the issuing thread gets the old value (0 where masked off); when the result is
//     used and other threads hold copies of the element (duplicate lanes/warps, or every
//     thread for a scalar), the owners publish it through shared memory: store at the
//     row-major index in the op's scratch (membar ordered it), barrier, every thread loads
//     its elements.
#include "codegen/lower_to_llvm.h"

#include "analysis/shared_footprint.h"
#include "codegen/lower_tma.h"
#include "ir/diagnostics.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/Transforms/Utils/LowerAtomic.h>

namespace tessera::codegen {

namespace {

llvm::AtomicRMWInst::BinOp binOpOf(const std::string &kind, const ir::Operation &op) {
  static const std::map<std::string, llvm::AtomicRMWInst::BinOp> table = {
      {"add", llvm::AtomicRMWInst::Add},   {"fadd", llvm::AtomicRMWInst::FAdd},
      {"max", llvm::AtomicRMWInst::Max},   {"min", llvm::AtomicRMWInst::Min},
      {"umax", llvm::AtomicRMWInst::UMax}, {"umin", llvm::AtomicRMWInst::UMin},
      {"and", llvm::AtomicRMWInst::And},   {"or", llvm::AtomicRMWInst::Or},
      {"xor", llvm::AtomicRMWInst::Xor},   {"xchg", llvm::AtomicRMWInst::Xchg},
      {"fmax", llvm::AtomicRMWInst::FMax}, {"fmin", llvm::AtomicRMWInst::FMin}};
  auto it = table.find(kind);
  if (it == table.end())
    ir::emitError(op, "codegen: unknown atomic_rmw kind '" + kind + "'");
  return it->second;
}

llvm::SyncScope::ID syncScopeOf(llvm::LLVMContext &context, const std::string &scope) {
  if (scope == "cta")
    return context.getOrInsertSyncScopeID("block");
  if (scope == "gpu")
    return context.getOrInsertSyncScopeID("device");
  return llvm::SyncScope::System;
}

bool releases(const std::string &sem) { return sem == "release" || sem == "acq_rel"; }
bool acquires(const std::string &sem) { return sem == "acquire" || sem == "acq_rel"; }

llvm::AtomicOrdering orderingOf(const std::string &sem) {
  if (sem == "acq_rel")
    return llvm::AtomicOrdering::AcquireRelease;
  if (sem == "acquire")
    return llvm::AtomicOrdering::Acquire;
  if (sem == "release")
    return llvm::AtomicOrdering::Release;
  return llvm::AtomicOrdering::Monotonic;
}

/// The op's attributes, decoded once.
struct AtomicInfo {
  bool isCas;
  llvm::AtomicRMWInst::BinOp binOp = llvm::AtomicRMWInst::Add;
  std::string sem, scope;
  llvm::SyncScope::ID syncScope;
  llvm::Type *type;    // the element's register type
  llvm::Type *intType; // same width integer (cmpxchg compares bits)
  llvm::Align align;
};

/// An integer view of `value` (cmpxchg takes integers) and back.
llvm::Value *toBits(llvm::IRBuilder<> &b, llvm::Value *value, llvm::Type *intType) {
  return value->getType() == intType ? value : b.CreateBitCast(value, intType);
}

/// atomicrmw at system scope as a cmpxchg loop (see the plan, step 2).
llvm::Value *emitSystemScopeRMW(KernelLowering &lowering, const AtomicInfo &info,
                                llvm::Value *pointer, llvm::Value *value) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Function *function = b.GetInsertBlock()->getParent();
  llvm::LoadInst *initial = b.CreateAlignedLoad(info.intType, pointer, info.align);
  initial->setAtomic(llvm::AtomicOrdering::Monotonic, info.syncScope);
  llvm::BasicBlock *entry = b.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(b.getContext(), "atomic.loop", function);
  auto *done = llvm::BasicBlock::Create(b.getContext(), "atomic.done", function);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *expected = b.CreatePHI(info.intType, 2);
  expected->addIncoming(initial, entry);
  llvm::Value *old = b.CreateBitCast(expected, info.type);
  llvm::Value *updated = llvm::buildAtomicRMWValue(info.binOp, b, old, value);
  llvm::AtomicCmpXchgInst *exchange = b.CreateAtomicCmpXchg(
      pointer, expected, toBits(b, updated, info.intType), info.align,
      llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic, info.syncScope);
  llvm::Value *seen = b.CreateExtractValue(exchange, 0);
  expected->addIncoming(seen, loop);
  b.CreateCondBr(b.CreateExtractValue(exchange, 1), done, loop);
  b.SetInsertPoint(done);
  return b.CreateBitCast(seen, info.type);
}

/// One element's atomic; `values` holds (val) for atomic_rmw and (cmp, val) for atomic_cas.
llvm::Value *emitAtomic(KernelLowering &lowering, const AtomicInfo &info, llvm::Value *pointer,
                        llvm::ArrayRef<llvm::Value *> values) {
  llvm::IRBuilder<> &b = lowering.builder();
  if (info.isCas) {
    llvm::AtomicOrdering success = orderingOf(info.sem);
    llvm::AtomicOrdering failure =
        acquires(info.sem) ? llvm::AtomicOrdering::Acquire : llvm::AtomicOrdering::Monotonic;
    llvm::AtomicCmpXchgInst *exchange = b.CreateAtomicCmpXchg(
        pointer, toBits(b, values[0], info.intType), toBits(b, values[1], info.intType), info.align,
        success, failure, info.syncScope);
    llvm::Value *old = b.CreateExtractValue(exchange, 0);
    return old->getType() == info.type ? old : b.CreateBitCast(old, info.type);
  }
  if (info.scope == "sys")
    return emitSystemScopeRMW(lowering, info, pointer, values[0]);
  return b.CreateAtomicRMW(info.binOp, pointer, values[0], info.align,
                           llvm::AtomicOrdering::Monotonic, info.syncScope);
}

/// 2 when registers (r, r + 1) of a fp16 fadd can go as one f16x2 atom (see the plan), else 1.
int packedHalfWidth(KernelLowering &lowering, const ir::Operation &op, const AtomicInfo &info,
                    int32_t duplicateRegisters) {
  const ir::Type &type = op.result()->type();
  if (info.isCas || info.binOp != llvm::AtomicRMWInst::FAdd || info.scope == "sys" ||
      !type.isTensor() || type.elementType().scalarKind() != ir::ScalarKind::F16 ||
      (duplicateRegisters & 1))
    return 1;
  return analysis::accessVectorWidth(lowering.axisInfo(), op) >= 2 ? 2 : 1;
}

/// `*pointer += (low, high)` as one relaxed gpu-scope f16x2 atom; returns the old pair.
llvm::Value *emitPackedHalfAdd(llvm::IRBuilder<> &b, llvm::Value *pointer, llvm::Value *low,
                               llvm::Value *high) {
  auto *pairType = llvm::FixedVectorType::get(b.getHalfTy(), 2);
  llvm::Value *pair = llvm::PoisonValue::get(pairType);
  pair = b.CreateInsertElement(b.CreateInsertElement(pair, low, uint64_t(0)), high, uint64_t(1));
  auto *type = llvm::FunctionType::get(b.getInt32Ty(), {pointer->getType(), b.getInt32Ty()}, false);
  auto *ptx = llvm::InlineAsm::get(type, "atom.global.add.noftz.f16x2 $0, [$1], $2;",
                                   "=r,l,r,~{memory}", /*hasSideEffects=*/true);
  llvm::Value *old = b.CreateCall(ptx, {pointer, b.CreateBitCast(pair, b.getInt32Ty())});
  return b.CreateBitCast(old, pairType);
}

/// Runs `body` under `predicate` (directly when null); returns the block `body` ended in and
/// the block the branch skipped from, the builder continuing after both.
template <typename Fn>
std::pair<llvm::BasicBlock *, llvm::BasicBlock *> emitIf(llvm::IRBuilder<> &b,
                                                         llvm::Value *predicate, Fn &&body) {
  if (!predicate) {
    body();
    return {b.GetInsertBlock(), nullptr};
  }
  llvm::BasicBlock *from = b.GetInsertBlock();
  llvm::Function *function = from->getParent();
  auto *then = llvm::BasicBlock::Create(b.getContext(), "atomic.then", function);
  auto *end = llvm::BasicBlock::Create(b.getContext(), "atomic.end", function);
  b.CreateCondBr(predicate, then, end);
  b.SetInsertPoint(then);
  body();
  llvm::BasicBlock *bodyEnd = b.GetInsertBlock();
  b.CreateBr(end);
  b.SetInsertPoint(end);
  return {bodyEnd, from};
}

/// The value `body` returns where `predicate` holds, 0 elsewhere.
template <typename Fn>
llvm::Value *emitGuarded(llvm::IRBuilder<> &b, llvm::Value *predicate, Fn &&body) {
  llvm::Value *value = nullptr;
  auto [bodyEnd, skippedFrom] = emitIf(b, predicate, [&] { value = body(); });
  if (!skippedFrom)
    return value;
  llvm::PHINode *phi = b.CreatePHI(value->getType(), 2);
  phi->addIncoming(value, bodyEnd);
  phi->addIncoming(llvm::Constant::getNullValue(value->getType()), skippedFrom);
  return phi;
}

llvm::Value *andPredicates(llvm::IRBuilder<> &b, llvm::Value *lhs, llvm::Value *rhs) {
  if (!lhs || !rhs)
    return lhs ? lhs : rhs;
  return b.CreateAnd(lhs, rhs);
}

/// Every thread gets the old values the owners computed (plan step 3). `issued[r]` is valid in
/// the thread that issued register r's atomic.
Registers publishResult(KernelLowering &lowering, const ir::Operation &op, const Registers &issued,
                        llvm::Value *owner) {
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &type = op.result()->type();
  llvm::Type *registerType = lowering.registerType(type, op);
  llvm::Type *memoryType = lowering.memoryType(type, op);
  int bytes = lowering.memoryBytes(type, op);
  int64_t numElements = type.isTensor() ? type.numElements() : 1;
  llvm::Value *base = lowering.sharedScratch(op, numElements * bytes);
  std::vector<llvm::Value *> offsets(issued.size(), lowering.i32(0));
  if (type.isTensor()) {
    const LinearLayout &layout = lowering.layoutOf(type, op);
    std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(layout);
    for (size_t reg = 0; reg < issued.size(); ++reg) {
      llvm::Value *linear = lowering.i32(0);
      for (int d = 0; d < type.rank(); ++d)
        linear = b.CreateAdd(b.CreateMul(linear, lowering.i32(type.shape()[d])), indices[reg][d]);
      offsets[reg] = linear;
    }
  }
  auto addressOf = [&](size_t reg) { return b.CreateGEP(memoryType, base, offsets[reg]); };
  for (size_t reg = 0; reg < issued.size(); ++reg) {
    llvm::Value *value = lowering.toMemory(issued[reg], memoryType);
    emitIf(b, owner, [&] { b.CreateAlignedStore(value, addressOf(reg), llvm::Align(bytes)); });
  }
  lowering.emitBarrier(); // internal to the op: the owners' values land before the loads
  Registers result;
  for (size_t reg = 0; reg < issued.size(); ++reg)
    result.push_back(lowering.fromMemory(
        b.CreateAlignedLoad(memoryType, addressOf(reg), llvm::Align(bytes)), registerType));
  return result;
}

} // namespace

void lowerAtomicOp(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &type = op.result()->type();
  if (op.hasAttr("tma") && lowerTmaReduce(lowering, op)) {
    // A descriptor reduction by the TMA (lower_tma.h): its old values are never used.
    llvm::Value *zero = llvm::Constant::getNullValue(lowering.registerType(type, op));
    lowering.setRegisters(op.result(), Registers(lowering.numRegisters(type, op), zero));
    return;
  }
  AtomicInfo info;
  info.isCas = op.code() == ir::OpCode::AtomicCAS;
  if (!info.isCas)
    info.binOp = binOpOf(op.stringAttr("kind"), op);
  info.sem = op.stringAttr("sem");
  info.scope = op.stringAttr("scope");
  info.syncScope = syncScopeOf(lowering.context(), info.scope);
  info.type = lowering.registerType(type, op);
  int bytes = lowering.memoryBytes(type, op);
  info.intType = b.getIntNTy(8 * bytes);
  info.align = llvm::Align(bytes);

  unsigned numValues = info.isCas ? 2 : 1;
  // After (ptr, val, mask): a descriptor reduction's tensor map and box coordinates, which the
  // pointer atomic ignores.
  const ir::Value *mask = !info.isCas && op.numOperands() >= 3 ? op.operand(2) : nullptr;
  int numRegs = lowering.numRegisters(type, op);
  int32_t duplicateRegisters = 0;
  llvm::Value *owner = nullptr;
  if (type.isTensor()) {
    const LinearLayout &layout = lowering.layoutOf(type, op);
    for (const ir::Value *operand : op.operands())
      if (operand->type().isTensor() && lowering.layoutOf(operand->type(), op) != layout)
        ir::emitError(op, "codegen: operand " + operand->type().str() +
                              " does not have the layout of the result " + type.str());
    duplicateRegisters = KernelLowering::duplicateRegisterMask(layout);
    owner = lowering.emitOwnerPredicate(layout);
  } else {
    owner = b.CreateICmpEQ(lowering.threadId(), lowering.i32(0));
  }

  bool fenced = !info.isCas;
  if (fenced && releases(info.sem))
    b.CreateFence(llvm::AtomicOrdering::Release, info.syncScope);
  const Registers &pointers = lowering.registersOf(op.operand(0));
  int width = packedHalfWidth(lowering, op, info, duplicateRegisters);
  Registers issued(numRegs);
  for (int reg = 0; reg < numRegs; reg += width) {
    if (reg & duplicateRegisters)
      continue; // filled from the register it duplicates below
    llvm::Value *predicate =
        andPredicates(b, mask ? lowering.registersOf(mask)[reg] : nullptr, owner);
    std::vector<llvm::Value *> values;
    for (unsigned i = 1; i <= numValues; ++i)
      values.push_back(lowering.registersOf(op.operand(i))[reg]);
    if (width == 2) {
      const Registers &addends = lowering.registersOf(op.operand(1));
      llvm::Value *pair = emitGuarded(b, predicate, [&] {
        return emitPackedHalfAdd(b, pointers[reg], addends[reg], addends[reg + 1]);
      });
      issued[reg] = b.CreateExtractElement(pair, uint64_t(0));
      issued[reg + 1] = b.CreateExtractElement(pair, uint64_t(1));
      continue;
    }
    issued[reg] = emitGuarded(b, predicate,
                              [&] { return emitAtomic(lowering, info, pointers[reg], values); });
  }
  for (int reg = 0; reg < numRegs; ++reg)
    if (reg & duplicateRegisters)
      issued[reg] = issued[reg & ~duplicateRegisters];
  if (fenced && acquires(info.sem))
    b.CreateFence(llvm::AtomicOrdering::Acquire, info.syncScope);

  // The same decision the allocator sized the scratch with (analysis/shared_footprint.h).
  lowering.setRegisters(op.result(), analysis::atomicPublishesResult(op)
                                         ? publishResult(lowering, op, issued, owner)
                                         : issued);
}

} // namespace tessera::codegen
