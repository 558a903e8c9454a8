// Lowering of inline_asm (tl.inline_asm_elementwise) to LLVM inline assembly, as Triton's.
//
// Each thread's registers are cut into groups of `pack` elements (the last group padded with
// poison: which elements share an instance is unspecified). Per group one asm call; operands
// are, per argument in order, its group's elements packed into 32-bit registers when narrower
// (4 x i8, 2 x f16, ... as one integer register; 32-bit and wider elements one each); results
// likewise, per output in order. The op gives output `index`; a pure asm's other outputs are
// other ops whose identical calls LLVM merges.
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/Support/Error.h>

#include <sstream>

namespace tessera::codegen {

namespace {

/// Elements of `bits` bits per asm register: 32-bit registers hold several narrow ones.
int elementsPerRegister(unsigned bits, int pack) {
  return std::min(std::max(32 / static_cast<int>(bits), 1), pack);
}

unsigned bitsOf(llvm::Type *type) {
  return type->isPointerTy() ? 64 : type->getPrimitiveSizeInBits().getFixedValue();
}

std::vector<std::string> splitTypes(const std::string &text) {
  std::vector<std::string> names;
  std::stringstream stream(text);
  for (std::string name; std::getline(stream, name, ',');)
    names.push_back(name);
  return names;
}

/// `elements` (one group's elements of one argument) as the asm's operand registers.
void packOperands(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &elements, int pack,
                  std::vector<llvm::Value *> &operands) {
  llvm::Type *type = elements[0]->getType();
  int perRegister = elementsPerRegister(bitsOf(type), pack);
  for (int j = 0; j < pack; j += perRegister) {
    if (perRegister == 1) {
      operands.push_back(elements[j]);
      continue;
    }
    llvm::Value *vector = llvm::PoisonValue::get(llvm::FixedVectorType::get(type, perRegister));
    for (int k = 0; k < perRegister; ++k)
      vector = b.CreateInsertElement(vector, elements[j + k], uint64_t(k));
    operands.push_back(b.CreateBitCast(vector, b.getIntNTy(bitsOf(type) * perRegister)));
  }
}

} // namespace

void lowerInlineAsm(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  int pack = static_cast<int>(op.intAttr("pack"));
  int index = static_cast<int>(op.intAttr("index"));
  std::vector<std::string> outputNames = splitTypes(op.stringAttr("outputs"));
  if (index < 0 || index >= static_cast<int>(outputNames.size()))
    ir::emitError(op, "codegen: inline_asm output index out of range");

  // The asm's result registers: per output, pack / perRegister registers.
  std::vector<llvm::Type *> elementTypes, registerTypes;
  std::vector<int> firstRegister;
  for (const std::string &name : outputNames) {
    ir::ScalarKind kind;
    if (!ir::parseScalarKind(name, kind))
      ir::emitError(op, "codegen: inline_asm output type '" + name + "' is not a scalar type");
    llvm::Type *element = lowering.registerType(ir::Type::scalar(kind), op);
    int perRegister = elementsPerRegister(bitsOf(element), pack);
    if (pack % perRegister != 0)
      ir::emitError(op, "codegen: inline_asm pack must be a multiple of the " +
                            std::to_string(perRegister) + " " + name +
                            " elements a 32-bit register holds");
    elementTypes.push_back(element);
    firstRegister.push_back(static_cast<int>(registerTypes.size()));
    llvm::Type *registerType =
        perRegister == 1 ? element : b.getIntNTy(bitsOf(element) * perRegister);
    for (int r = 0; r < pack / perRegister; ++r)
      registerTypes.push_back(registerType);
  }
  llvm::Type *returnType = registerTypes.size() == 1
                               ? registerTypes[0]
                               : llvm::StructType::get(lowering.context(), registerTypes);

  const ir::Type &resultType = op.result()->type();
  int numRegs = lowering.numRegisters(resultType, op);
  std::vector<const Registers *> args;
  for (const ir::Value *operand : op.operands())
    args.push_back(&lowering.registersOf(operand));
  std::vector<llvm::Type *> operandTypes;
  llvm::InlineAsm *asmCall = nullptr;
  llvm::Type *element = elementTypes[index];
  int perRegister = elementsPerRegister(bitsOf(element), pack);
  Registers result;
  for (int start = 0; start < numRegs; start += pack) {
    std::vector<llvm::Value *> operands;
    for (const Registers *arg : args) {
      std::vector<llvm::Value *> group;
      for (int j = 0; j < pack; ++j)
        group.push_back(start + j < numRegs ? (*arg)[start + j]
                                            : llvm::PoisonValue::get((*arg)[0]->getType()));
      packOperands(b, group, pack, operands);
    }
    if (!asmCall) {
      for (llvm::Value *operand : operands)
        operandTypes.push_back(operand->getType());
      auto *type = llvm::FunctionType::get(returnType, operandTypes, false);
      if (llvm::Error error = llvm::InlineAsm::verify(type, op.stringAttr("constraints")))
        ir::emitError(op, "codegen: inline_asm constraints '" + op.stringAttr("constraints") +
                              "' do not fit its " + std::to_string(operandTypes.size()) +
                              " operand and " + std::to_string(registerTypes.size()) +
                              " result registers: " + llvm::toString(std::move(error)));
      asmCall = llvm::InlineAsm::get(type, op.stringAttr("asm"), op.stringAttr("constraints"),
                                     /*hasSideEffects=*/!op.flagAttr("pure"));
    }
    llvm::Value *call = b.CreateCall(asmCall, operands);
    for (int r = 0; r < pack / perRegister; ++r) {
      int position = firstRegister[index] + r;
      llvm::Value *word = registerTypes.size() == 1 ? call : b.CreateExtractValue(call, position);
      if (perRegister == 1) {
        result.push_back(word);
        continue;
      }
      llvm::Value *vector = b.CreateBitCast(word, llvm::FixedVectorType::get(element, perRegister));
      for (int k = 0; k < perRegister; ++k)
        result.push_back(b.CreateExtractElement(vector, uint64_t(k)));
    }
  }
  result.resize(numRegs); // drop the padding's results
  lowering.setRegisters(op.result(), std::move(result));
}

} // namespace tessera::codegen
