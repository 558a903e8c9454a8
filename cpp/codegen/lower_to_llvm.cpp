// Tile IR -> LLVM IR: the kernel signature, per-thread context, and structured control flow.
//
// Walks a func in program order. for/if/while become basic blocks with one phi per register
// of each carried value; every other op goes to lower_elementwise.cpp, lower_memory.cpp or
// lower_layout.cpp. Thread coordinates of a register come from the value's linear layout:
// L(register, lane = tid % 32, warp = tid / 32) as an XOR of basis vectors (emitIndices).
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

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
  case ir::ScalarKind::F8E5M2: return builder_.getInt8Ty(); // bits only; no fp8 arithmetic yet
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
  auto sizeOf = [&](const char *dim) { return layout.hasInDim(dim) ? layout.getInDimSize(dim) : 1; };
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

// ---- Thread coordinates ---------------------------------------------------------------------

namespace {

/// XOR over the set bits i of `x` of bases[i][outDim] (an i32 value). Runs of bits that map
/// to consecutive powers of two become one mask-and-shift, so a blocked layout's lane part
/// is typically a single `(lane & m) << s`.
llvm::Value *emitBasisSum(llvm::IRBuilder<> &b, llvm::Value *x,
                          const std::vector<LinearLayout::BasisVector> &bases, int outDim) {
  llvm::Value *sum = nullptr;
  auto accumulate = [&](llvm::Value *term) { sum = sum ? b.CreateXor(sum, term) : term; };
  size_t bit = 0;
  while (bit < bases.size()) {
    uint32_t value = static_cast<uint32_t>(bases[bit][outDim]);
    if (value == 0) {
      ++bit;
      continue;
    }
    if ((value & (value - 1)) != 0) { // not a power of two: (x >> bit & 1) * value
      llvm::Value *set = b.CreateAnd(b.CreateLShr(x, bit), 1);
      accumulate(b.CreateMul(set, b.getInt32(value)));
      ++bit;
      continue;
    }
    int target = __builtin_ctz(value);
    size_t end = bit + 1;
    while (end < bases.size() && target + int(end - bit) < 31 &&
           static_cast<uint32_t>(bases[end][outDim]) == (1u << (target + (end - bit))))
      ++end;
    uint32_t mask = ((1u << (end - bit)) - 1) << bit;
    llvm::Value *field = b.CreateAnd(x, mask);
    if (target > static_cast<int>(bit))
      field = b.CreateShl(field, target - bit);
    else if (target < static_cast<int>(bit))
      field = b.CreateLShr(field, bit - target);
    accumulate(field);
    bit = end;
  }
  return sum ? sum : b.getInt32(0);
}

} // namespace

llvm::Value *KernelLowering::emitThreadPart(const LinearLayout &layout, int outDimIndex) {
  llvm::Value *lanePart = i32(0), *warpPart = i32(0);
  for (const auto &[name, bases] : layout.getBases()) {
    if (name == kLaneDim)
      lanePart = emitBasisSum(builder_, laneId(), bases, outDimIndex);
    else if (name == kWarpDim)
      warpPart = emitBasisSum(builder_, warpId(), bases, outDimIndex);
  }
  return builder_.CreateXor(lanePart, warpPart);
}

std::vector<std::vector<llvm::Value *>> KernelLowering::emitIndices(const LinearLayout &layout) {
  int numOutDims = layout.getNumOutDims();
  std::vector<llvm::Value *> threadPart;
  for (int d = 0; d < numOutDims; ++d)
    threadPart.push_back(emitThreadPart(layout, d));
  int numRegs = layout.hasInDim(kRegisterDim) ? layout.getInDimSize(kRegisterDim) : 1;
  std::vector<std::vector<llvm::Value *>> indices(numRegs);
  for (int reg = 0; reg < numRegs; ++reg) {
    LinearLayout::DimValues registerPart =
        layout.hasInDim(kRegisterDim) ? layout.apply({{kRegisterDim, reg}})
                                      : layout.apply({});
    for (int d = 0; d < numOutDims; ++d)
      indices[reg].push_back(registerPart[d].second == 0
                                 ? threadPart[d]
                                 : builder_.CreateXor(threadPart[d], i32(registerPart[d].second)));
  }
  return indices;
}

int32_t KernelLowering::duplicateRegisterMask(const LinearLayout &layout) {
  for (const auto &[name, mask] : layout.getFreeVariableMasks())
    if (name == kRegisterDim)
      return mask;
  return 0;
}

llvm::Value *KernelLowering::emitOwnerPredicate(const LinearLayout &layout) {
  llvm::Value *predicate = nullptr;
  for (const auto &[name, mask] : layout.getFreeVariableMasks()) {
    if (mask == 0 || (name != kLaneDim && name != kWarpDim))
      continue;
    llvm::Value *id = name == kLaneDim ? laneId() : warpId();
    llvm::Value *owns = builder_.CreateICmpEQ(builder_.CreateAnd(id, mask), i32(0));
    predicate = predicate ? builder_.CreateAnd(predicate, owns) : owns;
  }
  return predicate;
}

// ---- Hardware helpers -----------------------------------------------------------------------

llvm::Value *KernelLowering::callIntrinsic(llvm::Intrinsic::ID id,
                                           llvm::ArrayRef<llvm::Type *> types,
                                           llvm::ArrayRef<llvm::Value *> args) {
  llvm::Function *callee = llvm::Intrinsic::getOrInsertDeclaration(&module_, id, types);
  return builder_.CreateCall(callee, args);
}

void KernelLowering::emitThreadIds() {
  threadId_ = callIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {});
  threadId_->setName("tid");
}

llvm::IRBuilder<> KernelLowering::builderAfterThreadId() {
  // Right after the thread id in the entry block: what is built there dominates every use.
  auto *tid = llvm::cast<llvm::Instruction>(threadId_);
  if (llvm::Instruction *next = tid->getNextNode())
    return llvm::IRBuilder<>(next);
  return llvm::IRBuilder<>(tid->getParent());
}

llvm::Value *KernelLowering::laneId() {
  if (!laneId_) {
    llvm::IRBuilder<> entry = builderAfterThreadId();
    laneId_ = entry.CreateAnd(threadId_, 31, "lane");
  }
  return laneId_;
}

llvm::Value *KernelLowering::warpId() {
  if (!warpId_) {
    // The warp index is uniform across the warp; a shuffle from lane 0 lets ptxas know it.
    // Created on first use: the shuffle is convergent, so LLVM would not delete an unused one.
    llvm::IRBuilder<> entry = builderAfterThreadId();
    llvm::Function *shuffle = llvm::Intrinsic::getOrInsertDeclaration(
        &module_, llvm::Intrinsic::nvvm_shfl_sync_idx_i32);
    warpId_ = entry.CreateCall(shuffle, {i32(-1), entry.CreateLShr(threadId_, 5), i32(0), i32(31)},
                               "warp");
  }
  return warpId_;
}

llvm::Value *KernelLowering::sharedScratch(int64_t bytes) {
  if (!sharedMemory_) {
    // `extern __shared__` of size 0: the launcher passes sharedBytes() as dynamic memory.
    auto *type = llvm::ArrayType::get(builder_.getInt8Ty(), 0);
    sharedMemory_ = new llvm::GlobalVariable(module_, type, false,
                                             llvm::GlobalValue::ExternalLinkage, nullptr,
                                             "global_smem", nullptr,
                                             llvm::GlobalValue::NotThreadLocal, 3);
    sharedMemory_->setAlignment(llvm::Align(16));
  }
  sharedBytes_ = std::max(sharedBytes_, bytes);
  return sharedMemory_;
}

void KernelLowering::emitBarrier() {
  callIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {}, {i32(0)});
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
  auto *type = llvm::FunctionType::get(builder_.getVoidTy(), paramTypes, false);
  auto *function = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                          func.stringAttr("sym_name"), module_);
  function->setCallingConv(llvm::CallingConv::PTX_Kernel);
  function->addFnAttr("nvvm.maxntid", std::to_string(numWarps_ * 32));
  std::vector<int64_t> divisibility;
  if (func.hasAttr("divisibility"))
    divisibility = func.arrayAttr("divisibility");
  for (unsigned i = 0; i < body.numArguments(); ++i)
    if (body.argument(i)->type().isPointer() && i < divisibility.size() && divisibility[i] > 1)
      function->addParamAttr(
          i, llvm::Attribute::getWithAlignment(
                 context(), llvm::Align(largestPowerOfTwoDivisor(divisibility[i]))));

  // The analysis only reads the IR; it takes a mutable op for the passes that share it.
  axisInfo_ = std::make_unique<analysis::AxisInfoAnalysis>(const_cast<ir::Operation *>(&func));
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

std::vector<const Registers *> KernelLowering::lowerRegionBody(const ir::Block &block) {
  std::vector<const Registers *> yielded;
  for (const auto &op : block.operations()) {
    if (op->code() == ir::OpCode::Yield || op->code() == ir::OpCode::Condition) {
      for (const ir::Value *value : op->operands())
        yielded.push_back(&registersOf(value));
      return yielded;
    }
    lowerOp(*op);
  }
  return yielded;
}

void KernelLowering::lowerOp(const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Return:
    builder_.CreateRetVoid();
    return;
  case ir::OpCode::For: return lowerFor(op);
  case ir::OpCode::If: return lowerIf(op);
  case ir::OpCode::While: return lowerWhile(op);
  case ir::OpCode::Func:
  case ir::OpCode::Yield:
  case ir::OpCode::Condition:
    ir::emitError(op, "codegen: unexpected op here");
  case ir::OpCode::Load:
  case ir::OpCode::Store: return lowerMemoryOp(*this, op);
  case ir::OpCode::Splat:
  case ir::OpCode::Broadcast:
  case ir::OpCode::ExpandDims:
  case ir::OpCode::Reshape:
  case ir::OpCode::ConvertLayout: return lowerLayoutOp(*this, op);
  default: return lowerElementwiseOp(*this, op);
  }
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
  builder_.CreateCondBr(builder_.CreateICmpSLT(iv, upper), bodyBlock, exit);

  builder_.SetInsertPoint(bodyBlock);
  setRegisters(body.argument(0), {iv});
  for (unsigned i = 1; i < body.numArguments(); ++i)
    setRegisters(body.argument(i), carried[i - 1]);
  std::vector<const Registers *> yielded = lowerRegionBody(body);
  llvm::BasicBlock *latch = builder_.GetInsertBlock();
  iv->addIncoming(builder_.CreateAdd(iv, step, "iv.next"), latch);
  addIncoming(carried, yielded, latch);
  builder_.CreateBr(header);

  builder_.SetInsertPoint(exit);
  for (unsigned i = 0; i < op.numResults(); ++i)
    setRegisters(op.result(i), carried[i]);
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
