// Lowering of load and store: vectorized global accesses, masks, and duplicate owners.
//
// Plan per access:
//  1. Width (analysis::accessVectorWidth): the registers that hold consecutive elements of
//     the fastest dim (the layout's getNumConsecutiveInOut), limited by pointer contiguity and
//     alignment, by mask constancy (axis info) and by 16 bytes. A vector-add tile of f32 with
//     sizePerThread 4 and 16-byte-aligned pointers gives ld.global.v4.b32 / st.global.v4.b32.
//  2. Each group of `width` registers becomes one LLVM vector load/store of the group's first
//     pointer. A mask is constant over the group (1. guarantees it): one branch skips a
//     load, and a phi supplies `other` (zero when absent) to masked-off loads; a store is
//     one predicated PTX instruction (inline asm, as Triton).
//  3. Stores are issued only by the first owner of each element: registers, lanes and warps
//     that merely duplicate data (free variables of the layout) skip them, as in Triton; a
//     scalar store is issued by thread 0 alone.
#include "codegen/lower_tma.h"
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/InlineAsm.h>

namespace tessera::codegen {

namespace {

/// Runs `body` under `predicate` (directly when null). Returns the block that `body` ended in,
/// and the block the caller continues in (the same block when unpredicated).
template <typename Fn>
std::pair<llvm::BasicBlock *, llvm::BasicBlock *>
emitPredicated(llvm::IRBuilder<> &b, llvm::Value *predicate, const char *name, Fn &&body) {
  if (!predicate) {
    body();
    return {b.GetInsertBlock(), b.GetInsertBlock()};
  }
  llvm::BasicBlock *current = b.GetInsertBlock();
  llvm::Function *function = current->getParent();
  auto *then = llvm::BasicBlock::Create(b.getContext(), std::string(name) + ".then", function,
                                        current->getNextNode());
  auto *end = llvm::BasicBlock::Create(b.getContext(), std::string(name) + ".end", function,
                                       then->getNextNode());
  b.CreateCondBr(predicate, then, end);
  b.SetInsertPoint(then);
  body();
  llvm::BasicBlock *bodyEnd = b.GetInsertBlock();
  b.CreateBr(end);
  b.SetInsertPoint(end);
  return {bodyEnd, current};
}

/// Register i of every operand must hold the same element as register i of the result.
void requireLayout(KernelLowering &lowering, const ir::Operation &op, const LinearLayout &layout) {
  // A descriptor access's tensor map and box coordinates (attribute `tma`) are scalars after
  // the three tile operands: the masked access ignores them.
  size_t tiles = op.hasAttr("tma") ? std::min<size_t>(3, op.numOperands()) : op.numOperands();
  for (const ir::Value *operand : llvm::ArrayRef<ir::Value *>(op.operands()).take_front(tiles))
    if (!operand->type().isTensor() || lowering.layoutOf(operand->type(), op) != layout)
      ir::emitError(op, "codegen: operand " + operand->type().str() +
                            " does not have the layout of the accessed tensor");
}

llvm::Value *andPredicates(llvm::IRBuilder<> &b, llvm::Value *lhs, llvm::Value *rhs) {
  if (!lhs)
    return rhs;
  if (!rhs)
    return lhs;
  return b.CreateAnd(lhs, rhs);
}

void lowerLoad(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &resultType = op.result()->type();
  const ir::Value *mask = op.numOperands() >= 2 ? op.operand(1) : nullptr;
  llvm::Type *registerType = lowering.registerType(resultType, op);
  llvm::Type *memoryType = lowering.memoryType(resultType, op);
  int numRegs = lowering.numRegisters(resultType, op);
  int width = 1;
  if (resultType.isTensor()) {
    const LinearLayout &layout = lowering.layoutOf(resultType, op);
    requireLayout(lowering, op, layout);
    width = analysis::accessVectorWidth(lowering.axisInfo(), op);
  }
  const Registers &pointers = lowering.registersOf(op.operand(0));
  const Registers *masks = mask ? &lowering.registersOf(mask) : nullptr;
  const Registers *others = op.numOperands() >= 3 ? &lowering.registersOf(op.operand(2)) : nullptr;
  bool isVolatile = op.flagAttr("volatile");

  Registers result(numRegs);
  for (int first = 0; first < numRegs; first += width) {
    std::vector<llvm::Value *> loaded;
    auto [loadEnd, skipFrom] = emitPredicated(b, masks ? (*masks)[first] : nullptr, "load", [&] {
      loaded =
          emitVectorLoad(lowering, pointers[first], memoryType, registerType, width, isVolatile);
    });
    for (int i = 0; i < width; ++i) {
      if (!masks) {
        result[first + i] = loaded[i];
        continue;
      }
      llvm::PHINode *phi = b.CreatePHI(registerType, 2);
      phi->addIncoming(loaded[i], loadEnd);
      phi->addIncoming(others ? (*others)[first + i] : llvm::Constant::getNullValue(registerType),
                       skipFrom);
      result[first + i] = phi;
    }
  }
  lowering.setRegisters(op.result(), std::move(result));
}

/// The 32-bit (or narrower, or 64-bit) words of one access of `values`: sub-word elements
/// packed as accessType packs them. Returns the words and their width in bytes.
std::pair<std::vector<llvm::Value *>, int>
storeWords(KernelLowering &lowering, llvm::ArrayRef<llvm::Value *> values, llvm::Type *memoryType) {
  llvm::IRBuilder<> &b = lowering.builder();
  int elementBytes = static_cast<int>(memoryType->getPrimitiveSizeInBits() / 8);
  int width = static_cast<int>(values.size());
  int wordBytes = elementBytes >= 4 ? elementBytes : std::min(width * elementBytes, 4);
  int perWord = std::max(1, wordBytes / elementBytes);
  llvm::Type *wordType = b.getIntNTy(8 * wordBytes);
  std::vector<llvm::Value *> words;
  for (int first = 0; first < width; first += perWord) {
    llvm::Value *word;
    if (perWord == 1) {
      word = lowering.toMemory(values[first], memoryType);
    } else {
      word = llvm::PoisonValue::get(llvm::FixedVectorType::get(memoryType, perWord));
      for (int i = 0; i < perWord; ++i)
        word = b.CreateInsertElement(word, lowering.toMemory(values[first + i], memoryType),
                                     uint64_t(i));
    }
    // f32/f64 stay floats ("f"/"d"), so LLVM keeps optimizing them as floats (an fabs
    // stored through an i32 bitcast would become an and of the sign bit).
    bool keepFloat = perWord == 1 && (memoryType->isFloatTy() || memoryType->isDoubleTy());
    words.push_back(keepFloat ? word : b.CreateBitCast(word, wordType));
  }
  return {words, wordBytes};
}

/// The inline-asm constraint of a store word: its register class.
const char *wordConstraint(llvm::Type *type) {
  if (type->isFloatTy())
    return "f";
  if (type->isDoubleTy())
    return "d";
  switch (type->getIntegerBitWidth()) {
  case 8: return "c";
  case 16: return "h";
  case 32: return "r";
  default: return "l";
  }
}

/// `@p st[.volatile][.global].v<n>.b<bits> [address], {words}`: a masked store is one
/// predicated instruction, as Triton emits it. Branched around (the `store.then` blocks this
/// replaced), it let LLVM sink the stored value's loads and address arithmetic into each
/// branch, where ptxas ran them one branch at a time: a matmul epilogue read its eight
/// 16-byte rows from shared memory one after another instead of together
/// (docs/perf/matmul_sass.md).
void emitPredicatedStore(KernelLowering &lowering, llvm::Value *predicate, llvm::Value *address,
                         llvm::ArrayRef<llvm::Value *> values, llvm::Type *memoryType,
                         bool isVolatile) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto [words, wordBytes] = storeWords(lowering, values, memoryType);
  unsigned addressSpace = address->getType()->getPointerAddressSpace();
  const llvm::DataLayout &dataLayout = b.GetInsertBlock()->getModule()->getDataLayout();
  bool shortPointer = dataLayout.getPointerSizeInBits(addressSpace) == 32;
  std::string text = "@$0 st";
  text += isVolatile ? ".volatile" : "";
  text += addressSpace == 1 ? ".global" : addressSpace == 3 ? ".shared" : "";
  text += words.size() > 1 ? ".v" + std::to_string(words.size()) : "";
  text += ".b" + std::to_string(8 * wordBytes) + " [$1], ";
  std::string constraints = std::string("b,") + (shortPointer ? "r" : "l");
  std::string operands;
  for (size_t i = 0; i < words.size(); ++i) {
    operands += (i ? ", $" : "$") + std::to_string(i + 2);
    constraints += std::string(",") + wordConstraint(words[i]->getType());
  }
  text += words.size() > 1 ? "{" + operands + "};" : operands + ";";
  std::vector<llvm::Value *> arguments = {predicate, address};
  std::vector<llvm::Type *> types = {predicate->getType(), address->getType()};
  for (llvm::Value *word : words) {
    arguments.push_back(word);
    types.push_back(word->getType());
  }
  auto *type = llvm::FunctionType::get(b.getVoidTy(), types, false);
  b.CreateCall(llvm::InlineAsm::get(type, text, constraints, /*hasSideEffects=*/true), arguments);
}

void lowerStore(KernelLowering &lowering, const ir::Operation &op) {
  if (op.hasAttr("tma") && lowerTmaStore(lowering, op))
    return; // TESSERA_TMA_STORE; any other store (and the fallback): the masked stores below
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &valueType = op.operand(1)->type();
  const ir::Value *mask = op.numOperands() >= 3 ? op.operand(2) : nullptr;
  llvm::Type *memoryType = lowering.memoryType(valueType, op);
  int numRegs = lowering.numRegisters(valueType, op);
  int width = 1;
  int32_t duplicateRegisters = 0;
  llvm::Value *owner = nullptr;
  if (valueType.isTensor()) {
    const LinearLayout &layout = lowering.layoutOf(valueType, op);
    requireLayout(lowering, op, layout);
    width = analysis::accessVectorWidth(lowering.axisInfo(), op);
    duplicateRegisters = KernelLowering::duplicateRegisterMask(layout);
    while (duplicateRegisters & (width - 1)) // never split a vector between owners
      width /= 2;
    owner = lowering.emitOwnerPredicate(layout);
  } else {
    owner = b.CreateICmpEQ(lowering.threadId(), lowering.i32(0));
  }
  const Registers &pointers = lowering.registersOf(op.operand(0));
  const Registers &values = lowering.registersOf(op.operand(1));
  const Registers *masks = mask ? &lowering.registersOf(mask) : nullptr;
  bool isVolatile = op.flagAttr("volatile");

  for (int first = 0; first < numRegs; first += width) {
    if (first & duplicateRegisters)
      continue; // another register of this thread stores the same element
    llvm::Value *predicate = andPredicates(b, masks ? (*masks)[first] : nullptr, owner);
    llvm::ArrayRef<llvm::Value *> group = llvm::ArrayRef<llvm::Value *>(values).slice(first, width);
    if (predicate)
      emitPredicatedStore(lowering, predicate, pointers[first], group, memoryType, isVolatile);
    else
      emitVectorStore(lowering, pointers[first], group, memoryType, isVolatile);
  }
}

} // namespace

namespace {

/// The LLVM type of one access of `count` elements: sub-word elements are packed into i32
/// words (so 8 x f16 is one ld.global.v4.b32), wider ones form a plain vector.
llvm::Type *accessType(llvm::LLVMContext &context, llvm::Type *memoryType, int count,
                       int elementBytes) {
  if (count == 1)
    return memoryType;
  if (elementBytes >= 4)
    return llvm::FixedVectorType::get(memoryType, count);
  int totalBytes = count * elementBytes;
  int wordBytes = std::min(totalBytes, 4);
  llvm::Type *word = llvm::IntegerType::get(context, 8 * wordBytes);
  return totalBytes == wordBytes ? word : llvm::FixedVectorType::get(word, totalBytes / wordBytes);
}

} // namespace

std::vector<llvm::Value *> emitVectorLoad(KernelLowering &lowering, llvm::Value *address,
                                          llvm::Type *memoryType, llvm::Type *registerType,
                                          int width, bool isVolatile) {
  llvm::IRBuilder<> &b = lowering.builder();
  int elementBytes = static_cast<int>(memoryType->getPrimitiveSizeInBits() / 8);
  llvm::Type *type = accessType(lowering.context(), memoryType, width, elementBytes);
  llvm::Value *value =
      b.CreateAlignedLoad(type, address, llvm::Align(width * elementBytes), isVolatile);
  std::vector<llvm::Value *> elements;
  if (width == 1)
    return {lowering.fromMemory(value, registerType)};
  value = b.CreateBitCast(value, llvm::FixedVectorType::get(memoryType, width));
  for (int i = 0; i < width; ++i)
    elements.push_back(lowering.fromMemory(b.CreateExtractElement(value, i), registerType));
  return elements;
}

void emitVectorStore(KernelLowering &lowering, llvm::Value *address,
                     llvm::ArrayRef<llvm::Value *> values, llvm::Type *memoryType,
                     bool isVolatile) {
  llvm::IRBuilder<> &b = lowering.builder();
  int width = static_cast<int>(values.size());
  int elementBytes = static_cast<int>(memoryType->getPrimitiveSizeInBits() / 8);
  llvm::Value *value;
  if (width == 1) {
    value = lowering.toMemory(values[0], memoryType);
  } else {
    value = llvm::PoisonValue::get(llvm::FixedVectorType::get(memoryType, width));
    for (int i = 0; i < width; ++i)
      value = b.CreateInsertElement(value, lowering.toMemory(values[i], memoryType), i);
    value = b.CreateBitCast(value, accessType(lowering.context(), memoryType, width, elementBytes));
  }
  b.CreateAlignedStore(value, address, llvm::Align(width * elementBytes), isVolatile);
}

void lowerMemoryOp(KernelLowering &lowering, const ir::Operation &op) {
  if (op.code() == ir::OpCode::Load)
    return lowerLoad(lowering, op);
  if (op.code() == ir::OpCode::Store)
    return lowerStore(lowering, op);
  ir::emitError(op, std::string("codegen: no memory lowering for op '") + op.name() + "'");
}

} // namespace tessera::codegen
