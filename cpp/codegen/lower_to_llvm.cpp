// Tile IR -> LLVM IR: the kernel signature, value types, and structured control flow.
//
// Walks a func in program order. for/if/while become basic blocks with one phi per register
// of each carried value; every other op goes to lower_elementwise.cpp, lower_memory.cpp or
// lower_layout.cpp. Thread coordinates of a register come from the value's linear layout:
// L(register, lane = tid % 32, warp = tid / 32) (thread_indices.cpp).
#include "codegen/lower_to_llvm.h"
#include "codegen/codegen.h"
#include "codegen/lower_tensormap.h"
#include "codegen/lower_tma.h"
#include "codegen/symbol_names.h"

#include "codegen/lower_debug.h"
#include "codegen/lower_matrix.h"
#include "codegen/lower_reduction.h"

#include "analysis/shared_access.h"

#include "ir/diagnostics.h"
#include "layout/mma.h"

#include <algorithm>
#include <array>
#include <optional>

namespace tessera::codegen {

int64_t largestPowerOfTwoDivisor(int64_t value) {
  if (value == 0)
    return int64_t(1) << 30;
  uint64_t magnitude = value < 0 ? -static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  return std::min<int64_t>(int64_t(1) << 30, int64_t(1) << __builtin_ctzll(magnitude));
}

KernelLowering::KernelLowering(llvm::Module &module, int numWarps)
    : module_(module), builder_(module.getContext()), numWarps_(numWarps) {}

// ---- Values and types ---------------------------------------------------------------------

const Registers &KernelLowering::registersOf(const ir::Value *value) const {
  auto it = values_.find(value);
  if (it == values_.end())
    throw ir::CompileError("codegen: internal error: a value is used before it was lowered");
  return it->second;
}

void KernelLowering::setRegisters(const ir::Value *value, Registers registers) {
  values_[value] = std::move(registers);
}

llvm::Type *KernelLowering::registerType(const ir::Type &type, const ir::Operation &op) {
  ir::Type element = type.elementType();
  if (element.isPointer())
    return llvm::PointerType::get(context(), element.addressSpace());
  switch (element.scalarKind()) {
  case ir::ScalarKind::I1: return builder_.getInt1Ty();
  case ir::ScalarKind::I8: return builder_.getInt8Ty();
  case ir::ScalarKind::I16: return builder_.getInt16Ty();
  case ir::ScalarKind::I32: return builder_.getInt32Ty();
  case ir::ScalarKind::I64: return builder_.getInt64Ty();
  case ir::ScalarKind::F16: return builder_.getHalfTy();
  case ir::ScalarKind::BF16: return builder_.getBFloatTy();
  case ir::ScalarKind::F32: return builder_.getFloatTy();
  case ir::ScalarKind::F64: return builder_.getDoubleTy();
  case ir::ScalarKind::F8E4M3:
  case ir::ScalarKind::F8E5M2:
  case ir::ScalarKind::F8E4M3B15:
  case ir::ScalarKind::F8E4M3FNUZ:
  case ir::ScalarKind::F8E5M2FNUZ: return builder_.getInt8Ty(); // bits; see lower_fp8.cpp
  }
  ir::emitError(op, "codegen: unsupported element type " + type.str());
}

llvm::Type *KernelLowering::memoryType(const ir::Type &type, const ir::Operation &op) {
  ir::Type element = type.elementType();
  if (element.isPointer())
    return builder_.getInt64Ty();
  if (element.isScalar() && element.scalarKind() == ir::ScalarKind::I1)
    return builder_.getInt8Ty();
  return registerType(element, op);
}

int KernelLowering::memoryBytes(const ir::Type &type, const ir::Operation &op) {
  return static_cast<int>(module_.getDataLayout().getTypeStoreSize(memoryType(type, op)));
}

llvm::Value *KernelLowering::toMemory(llvm::Value *value, llvm::Type *memoryType) {
  if (value->getType() == memoryType)
    return value;
  if (value->getType()->isPointerTy())
    return builder_.CreatePtrToInt(value, memoryType);
  return builder_.CreateZExt(value, memoryType); // i1 -> i8
}

llvm::Value *KernelLowering::fromMemory(llvm::Value *value, llvm::Type *registerType) {
  if (value->getType() == registerType)
    return value;
  if (registerType->isPointerTy())
    return builder_.CreateIntToPtr(value, registerType);
  return builder_.CreateICmpNE(value, llvm::ConstantInt::get(value->getType(), 0)); // i8 -> i1
}

const LinearLayout &KernelLowering::layoutOf(const ir::Type &tensorType, const ir::Operation &op) {
  if (!tensorType.isTensor() || !tensorType.encoding())
    ir::emitError(op, "codegen: tensor type " + tensorType.str() +
                          " has no layout encoding (run the layout passes first)");
  std::string key = tensorType.str();
  auto it = layouts_.find(key);
  if (it != layouts_.end())
    return it->second;
  LinearLayout layout;
  try {
    layout = tensorType.encoding()->toLinearLayout(tensorType.shape());
  } catch (const std::exception &error) {
    ir::emitError(op, std::string("codegen: cannot build the layout of ") + tensorType.str() +
                          ": " + error.what());
  }
  auto sizeOf = [&](const char *dim) {
    return layout.hasInDim(dim) ? layout.getInDimSize(dim) : 1;
  };
  if (sizeOf(kLaneDim) != 32 || sizeOf(kWarpDim) != numWarps_ || sizeOf(kBlockDim) != 1)
    ir::emitError(op, "codegen: layout of " + tensorType.str() + " does not cover a CTA of " +
                          std::to_string(numWarps_) + " warps of 32 lanes: " + layout.str());
  return layouts_.emplace(key, std::move(layout)).first->second;
}

int KernelLowering::numRegisters(const ir::Type &type, const ir::Operation &op) {
  if (!type.isTensor())
    return 1;
  const LinearLayout &layout = layoutOf(type, op);
  return layout.hasInDim(kRegisterDim) ? layout.getInDimSize(kRegisterDim) : 1;
}

// ---- Functions and control flow -------------------------------------------------------------

llvm::Function *KernelLowering::lowerFunction(const ir::Operation &func) {
  const ir::Block &body = func.regions().front()->front();
  std::vector<llvm::Type *> paramTypes;
  for (const auto &arg : body.arguments()) {
    if (arg->type().isTensor())
      ir::emitError(func, "codegen: kernel arguments must be scalars or pointers, got " +
                              arg->type().str());
    paramTypes.push_back(registerType(arg->type(), func));
  }
  if (func.hasAttr("tensormaps")) // generic pointers to their byval parameters (lower_tma.h)
    for (int64_t index : func.arrayAttr("tensormaps"))
      paramTypes.at(static_cast<size_t>(index)) = llvm::PointerType::get(context(), 0);
  addGlobalScratchParameter(func, context(), paramTypes); // last (lower_tensormap.h)
  auto *type = llvm::FunctionType::get(builder_.getVoidTy(), paramTypes, false);
  auto *function = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                          ptxSymbolName(func.stringAttr("sym_name")), module_);
  function->setCallingConv(llvm::CallingConv::PTX_Kernel);
  producerWarps_ = 0;
  for (const auto &op : body.operations()) // a producer warpgroup after the num_warps warps
    if (op->code() == ir::OpCode::WarpSpecialize)
      producerWarps_ = static_cast<int>(op->intAttr("producer_warps"));
  issuerThread_ = 0;
  consumersOnly_ = false;
  function->addFnAttr("nvvm.maxntid", std::to_string((numWarps_ + producerWarps_) * 32));
  std::vector<int64_t> divisibility;
  if (func.hasAttr("divisibility"))
    divisibility = func.arrayAttr("divisibility");
  for (unsigned i = 0; i < body.numArguments(); ++i)
    if (body.argument(i)->type().isPointer() && i < divisibility.size() && divisibility[i] > 1)
      function->addParamAttr(
          i, llvm::Attribute::getWithAlignment(
                 context(), llvm::Align(largestPowerOfTwoDivisor(divisibility[i]))));
  addTensorMapParameters(func, *function);

  // The analysis only reads the IR; it takes a mutable op for the passes that share it.
  axisInfo_ = std::make_unique<analysis::AxisInfoAnalysis>(const_cast<ir::Operation *>(&func));
  if (!func.hasAttr("shared_size"))
    ir::emitError(func, "codegen: the func has no shared_size (run allocate_shared and membar)");
  sharedBytes_ = func.intAttr("shared_size");
  usesWgmma_ = false;
  pendingWgmma_.clear();
  loweredOps_.clear();
  const_cast<ir::Operation &>(func).walk(
      [&](ir::Operation *op) { usesWgmma_ |= analysis::isWgmmaDot(*op); });
  builder_.SetInsertPoint(llvm::BasicBlock::Create(context(), "entry", function));
  emitThreadIds();
  for (unsigned i = 0; i < body.numArguments(); ++i)
    setRegisters(body.argument(i), {function->getArg(i)});
  lowerBlock(body);
  return function;
}

void KernelLowering::lowerBlock(const ir::Block &block) {
  for (const auto &op : block.operations())
    lowerOp(*op);
}

std::vector<const Registers *>
KernelLowering::lowerRegionBody(const ir::Block &block, bool controlFlow, CarriedGroups *carried) {
  std::vector<const Registers *> yielded;
  for (const auto &op : block.operations()) {
    if (op->code() == ir::OpCode::Yield || op->code() == ir::OpCode::Condition) {
      // Control flow merges here: nothing stays in flight but what a loop carries (the
      // wgmma_waits pass placed the wait before this terminator).
      if (controlFlow && carried)
        markCarriedInFlight(*op, *carried);
      else if (controlFlow && !pendingWgmma_.empty())
        ir::emitError(*op, "codegen: wgmma groups in flight at the end of a region: run the "
                           "wgmma_waits pass");
      for (const ir::Value *value : op->operands())
        yielded.push_back(&registersOf(value));
      return yielded;
    }
    lowerOp(*op);
  }
  return yielded;
}

void KernelLowering::lowerOp(const ir::Operation &op) {
  try {
    checkWgmmaWaited(op);
    // The wait of the op's own barrier (emitBarrier); a combiner's ops, lowered inside a
    // reduce or scan, keep the enclosing op's.
    std::optional<int64_t> enclosing = innerWgmmaWait_;
    innerWgmmaWait_ = op.hasAttr("inner_wgmma_wait")
                          ? std::optional<int64_t>(op.intAttr("inner_wgmma_wait"))
                          : enclosing;
    dispatchOp(op);
    innerWgmmaWait_ = enclosing;
    loweredOps_.insert(&op);
  } catch (const ir::CompileError &) {
    throw;
  } catch (const std::exception &error) { // e.g. a layout the algebra rejects
    ir::emitError(op, std::string("codegen: internal error: ") + error.what());
  }
}

namespace {

void lowerTensorCoreOnly(KernelLowering &lowering, const ir::Operation &op) {
  if (!lowerTensorCoreOp(lowering, op))
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
}

void lowerTmaOnly(KernelLowering &lowering, const ir::Operation &op) {
  if (!lowerTmaOp(lowering, op))
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
}

void lowerTensorMapOnly(KernelLowering &lowering, const ir::Operation &op) {
  if (!lowerTensorMapOp(lowering, op))
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
}

} // namespace

const std::array<LoweringRule, ir::kNumOpCodes> &KernelLowering::loweringTable() {
  static const std::array<LoweringRule, ir::kNumOpCodes> table = [] {
    std::array<LoweringRule, ir::kNumOpCodes> t{};
    using ir::OpCode;
    auto set = [&](std::initializer_list<OpCode> codes, const char *name, LowerFn lower) {
      for (OpCode code : codes)
        t[static_cast<size_t>(code)] = {name, lower};
    };
    set({OpCode::Return}, "return",
        [](KernelLowering &l, const ir::Operation &) { l.builder().CreateRetVoid(); });
    set({OpCode::For}, "lowerFor",
        [](KernelLowering &l, const ir::Operation &op) { l.lowerFor(op); });
    set({OpCode::If}, "lowerIf", [](KernelLowering &l, const ir::Operation &op) { l.lowerIf(op); });
    set({OpCode::While}, "lowerWhile",
        [](KernelLowering &l, const ir::Operation &op) { l.lowerWhile(op); });
    set({OpCode::Load, OpCode::Store}, "lowerMemoryOp", lowerMemoryOp);
    // A convert_layout into a dot operand goes through shared memory (lowerTensorCoreOp).
    set({OpCode::Splat, OpCode::Broadcast, OpCode::ExpandDims, OpCode::Reshape,
         OpCode::ConvertLayout},
        "lowerLayoutOp", lowerLayoutOp);
    set({OpCode::Print, OpCode::Assert}, "lowerDebugOp", lowerDebugOp);
    set({OpCode::Reduce}, "lowerReduceOp", lowerReduceOp);
    set({OpCode::Scan}, "lowerScanOp", lowerScanOp);
    set({OpCode::Exp, OpCode::Exp2, OpCode::Log, OpCode::Log2, OpCode::Sqrt, OpCode::PreciseSqrt,
         OpCode::Rsqrt, OpCode::Sin, OpCode::Cos, OpCode::Erf, OpCode::Tanh, OpCode::Floor,
         OpCode::Ceil, OpCode::AbsF, OpCode::AbsI, OpCode::Fma, OpCode::FastDivF, OpCode::MulHiUI,
         OpCode::ExternElementwise},
        "lowerMathOp", lowerMathOp);
    set({OpCode::AtomicRMW, OpCode::AtomicCAS}, "lowerAtomicOp", lowerAtomicOp);
    set({OpCode::Dot, OpCode::Trans, OpCode::LocalAlloc, OpCode::LocalLoad, OpCode::AsyncCopy,
         OpCode::AsyncCommitGroup, OpCode::AsyncWait, OpCode::Barrier, OpCode::WarpgroupTurn},
        "lowerTensorCoreOp", lowerTensorCoreOnly);
    set({OpCode::WgmmaWait}, "retireWgmma", [](KernelLowering &l, const ir::Operation &op) {
      l.retireWgmma(static_cast<size_t>(op.intAttr("pending")));
    });
    set({OpCode::MBarrierInit, OpCode::MBarrierExpectTx, OpCode::TmaLoad, OpCode::MBarrierWait,
         OpCode::MBarrierInval, OpCode::MBarrierArrive},
        "lowerTmaOp", lowerTmaOnly);
    set({OpCode::WarpSpecialize}, "lowerWarpSpecialize",
        [](KernelLowering &l, const ir::Operation &op) { l.lowerWarpSpecialize(op); });
    set({OpCode::GlobalScratch, OpCode::TensorMapCreate}, "lowerTensorMapOp", lowerTensorMapOnly);
    set({OpCode::Constant, OpCode::ProgramId, OpCode::NumPrograms, OpCode::MakeRange,
         OpCode::InlineAsm},
        "lowerElementwiseOp", lowerElementwiseOp);
    // Every other op with an instruction per element (lower_elementwise.cpp's table).
    for (size_t i = 0; i < ir::kNumOpCodes; ++i)
      if (!t[i].lower && hasElementLowering(static_cast<OpCode>(i)))
        t[i] = {"lowerElementwiseOp", lowerElementwiseOp};
    return t;
  }();
  return table;
}

void KernelLowering::dispatchOp(const ir::Operation &op) {
  if (lowerTensorCoreOp(*this, op)) // dot, trans, shared-memory ops, operand conversions
    return;
  const LoweringRule &rule = loweringTable()[static_cast<size_t>(op.code())];
  if (!rule.lower) // func, yield, condition: ops.def's NO_RULE (their enclosing op's lowering)
    ir::emitError(op, "codegen: unexpected op here");
  rule.lower(*this, op);
}

std::vector<std::pair<std::string, std::string>> loweringRules() {
  std::vector<std::pair<std::string, std::string>> rules;
  const auto &table = KernelLowering::loweringTable();
  for (size_t i = 0; i < ir::kNumOpCodes; ++i)
    if (table[i].lower)
      rules.emplace_back(ir::opName(static_cast<ir::OpCode>(i)), table[i].name);
  return rules;
}

std::vector<Registers> KernelLowering::createPhis(const std::vector<ir::Value *> &values,
                                                  const ir::Operation &op) {
  std::vector<Registers> phis;
  for (const ir::Value *value : values) {
    Registers registers;
    llvm::Type *type = registerType(value->type(), op);
    for (int i = 0, n = numRegisters(value->type(), op); i < n; ++i)
      registers.push_back(builder_.CreatePHI(type, 2));
    phis.push_back(std::move(registers));
  }
  return phis;
}

namespace {

void addIncoming(const std::vector<Registers> &phis, const std::vector<const Registers *> &values,
                 llvm::BasicBlock *from) {
  for (size_t i = 0; i < phis.size(); ++i)
    for (size_t r = 0; r < phis[i].size(); ++r)
      llvm::cast<llvm::PHINode>(phis[i][r])->addIncoming((*values[i])[r], from);
}

std::vector<ir::Value *> argumentsOf(const ir::Block &block, unsigned first = 0) {
  std::vector<ir::Value *> values;
  for (unsigned i = first; i < block.numArguments(); ++i)
    values.push_back(block.argument(i));
  return values;
}

} // namespace

void KernelLowering::lowerFor(const ir::Operation &op) {
  // preheader -> header(phis; iv < ub ?) -> body ... latch(iv += step) -> header | exit
  // The groups of the loop's `wgmma_carried` products may stay in flight across the back edge
  // (CarriedGroups): pending at the header, waited for where the body's wgmma_wait ops say,
  // and by the wgmma_wait right after the loop on the exit path.
  const ir::Block &body = op.regions()[0]->front();
  llvm::Value *lower = registersOf(op.operand(0))[0];
  llvm::Type *ivType = lower->getType();
  llvm::Value *upper = builder_.CreateSExtOrTrunc(registersOf(op.operand(1))[0], ivType);
  llvm::Value *step = builder_.CreateSExtOrTrunc(registersOf(op.operand(2))[0], ivType);
  std::vector<const Registers *> inits;
  for (unsigned i = 3; i < op.numOperands(); ++i)
    inits.push_back(&registersOf(op.operand(i)));

  llvm::Function *function = builder_.GetInsertBlock()->getParent();
  llvm::BasicBlock *preheader = builder_.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(context(), "for.header", function);
  auto *bodyBlock = llvm::BasicBlock::Create(context(), "for.body", function);
  auto *exit = llvm::BasicBlock::Create(context(), "for.exit", function);
  builder_.CreateBr(header);

  builder_.SetInsertPoint(header);
  llvm::PHINode *iv = builder_.CreatePHI(ivType, 2, "iv");
  iv->addIncoming(lower, preheader);
  std::vector<Registers> carried = createPhis(argumentsOf(body, 1), op);
  addIncoming(carried, inits, preheader);
  CarriedGroups groups = carriedWgmmaGroups(op); // pendingWgmma_ is empty (checkWgmmaWaited)
  auto *poison = llvm::PoisonValue::get(builder_.getInt32Ty());
  for (size_t g = 0; g < groups.indices.size(); ++g) {
    for (llvm::PHINode *phi : groups.inputs[g])
      phi->addIncoming(poison, preheader);
    pendingWgmma_.push_back(
        {body.argument(groups.indices[g] + 1), {groups.inputs[g].begin(), groups.inputs[g].end()}});
  }
  builder_.CreateCondBr(builder_.CreateICmpSLT(iv, upper), bodyBlock, exit);

  builder_.SetInsertPoint(bodyBlock);
  setRegisters(body.argument(0), {iv});
  for (unsigned i = 1; i < body.numArguments(); ++i)
    setRegisters(body.argument(i), carried[i - 1]);
  std::vector<const Registers *> yielded = lowerRegionBody(body, true, &groups);
  llvm::BasicBlock *latch = builder_.GetInsertBlock();
  iv->addIncoming(builder_.CreateAdd(iv, step, "iv.next"), latch);
  addIncoming(carried, yielded, latch);
  for (size_t g = 0; g < groups.indices.size(); ++g) { // the words the in-flight group reads
    const ir::Value *result = body.terminator()->operand(groups.indices[g]);
    auto pending = std::find_if(pendingWgmma_.begin(), pendingWgmma_.end(),
                                [&](const PendingWgmma &p) { return p.result == result; });
    for (size_t w = 0; w < groups.inputs[g].size(); ++w)
      groups.inputs[g][w]->addIncoming(groups.inFlight[g] ? pending->inputs[w] : poison, latch);
  }
  pendingWgmma_.clear(); // the exit path's pending groups: the header's
  builder_.CreateBr(header);

  builder_.SetInsertPoint(exit);
  for (unsigned i = 0; i < op.numResults(); ++i)
    setRegisters(op.result(i), carried[i]);
  for (size_t g = 0; g < groups.indices.size(); ++g) // waited for by the wgmma_wait after it
    pendingWgmma_.push_back(
        {op.result(groups.indices[g]), {groups.inputs[g].begin(), groups.inputs[g].end()}});
}

void KernelLowering::lowerIf(const ir::Operation &op) {
  llvm::Function *function = builder_.GetInsertBlock()->getParent();
  auto *thenBlock = llvm::BasicBlock::Create(context(), "if.then", function);
  auto *elseBlock = llvm::BasicBlock::Create(context(), "if.else", function);
  auto *merge = llvm::BasicBlock::Create(context(), "if.end", function);
  builder_.CreateCondBr(registersOf(op.operand(0))[0], thenBlock, elseBlock);

  std::vector<std::pair<std::vector<const Registers *>, llvm::BasicBlock *>> arms;
  for (unsigned region = 0; region < 2; ++region) {
    builder_.SetInsertPoint(region == 0 ? thenBlock : elseBlock);
    std::vector<const Registers *> yielded = lowerRegionBody(op.regions()[region]->front());
    arms.emplace_back(std::move(yielded), builder_.GetInsertBlock());
    builder_.CreateBr(merge);
  }

  builder_.SetInsertPoint(merge);
  std::vector<ir::Value *> results;
  for (unsigned i = 0; i < op.numResults(); ++i)
    results.push_back(op.result(i));
  std::vector<Registers> phis = createPhis(results, op);
  for (auto &[yielded, from] : arms)
    addIncoming(phis, yielded, from);
  for (unsigned i = 0; i < op.numResults(); ++i)
    setRegisters(op.result(i), phis[i]);
}

void KernelLowering::lowerWhile(const ir::Operation &op) {
  // preheader -> before(phis) --cond--> after ... -> before
  //                           \--else--> exit (results = the condition's values)
  const ir::Block &before = op.regions()[0]->front();
  const ir::Block &after = op.regions()[1]->front();
  std::vector<const Registers *> inits;
  for (const ir::Value *value : op.operands())
    inits.push_back(&registersOf(value));

  llvm::Function *function = builder_.GetInsertBlock()->getParent();
  llvm::BasicBlock *preheader = builder_.GetInsertBlock();
  auto *beforeBlock = llvm::BasicBlock::Create(context(), "while.before", function);
  auto *afterBlock = llvm::BasicBlock::Create(context(), "while.after", function);
  auto *exit = llvm::BasicBlock::Create(context(), "while.exit", function);
  builder_.CreateBr(beforeBlock);

  builder_.SetInsertPoint(beforeBlock);
  std::vector<Registers> carried = createPhis(argumentsOf(before), op);
  addIncoming(carried, inits, preheader);
  for (unsigned i = 0; i < before.numArguments(); ++i)
    setRegisters(before.argument(i), carried[i]);
  std::vector<const Registers *> condition = lowerRegionBody(before);
  builder_.CreateCondBr((*condition[0])[0], afterBlock, exit);

  builder_.SetInsertPoint(afterBlock);
  for (unsigned i = 0; i < after.numArguments(); ++i)
    setRegisters(after.argument(i), *condition[i + 1]);
  std::vector<const Registers *> yielded = lowerRegionBody(after);
  addIncoming(carried, yielded, builder_.GetInsertBlock());
  builder_.CreateBr(beforeBlock);

  builder_.SetInsertPoint(exit);
  for (unsigned i = 0; i < op.numResults(); ++i)
    setRegisters(op.result(i), *condition[i + 1]);
}

} // namespace tessera::codegen
