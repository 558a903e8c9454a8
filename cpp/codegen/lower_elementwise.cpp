// Lowering of the ops that compute each register independently: constants, program ids,
// make_range, addptr, integer and float arithmetic, compares, select and casts.
//
// An elementwise op on tensors applies its LLVM instruction register by register; operands
// share the result's layout (the layout passes insert convert_layout otherwise), so register
// i of every operand holds the same element. make_range is the one op that reads the layout:
// register i holds element start + L(i, lane, warp).
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

namespace {

llvm::Constant *constantOf(const ir::Attribute &value, llvm::Type *type, const ir::Operation &op) {
  double asDouble = 0;
  int64_t asInt = 0;
  if (const bool *flag = std::get_if<bool>(&value))
    asInt = *flag, asDouble = *flag;
  else if (const int64_t *integer = std::get_if<int64_t>(&value))
    asInt = *integer, asDouble = static_cast<double>(*integer);
  else if (const double *real = std::get_if<double>(&value))
    asDouble = *real, asInt = static_cast<int64_t>(*real);
  else
    ir::emitError(op, "codegen: constant value must be a bool, integer or float");
  if (type->isFloatingPointTy())
    return llvm::ConstantFP::get(type, asDouble);
  if (type->isIntegerTy())
    return llvm::ConstantInt::get(type, static_cast<uint64_t>(asInt), /*IsSigned=*/true);
  if (type->isPointerTy() && asInt == 0)
    return llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(type));
  ir::emitError(op, "codegen: unsupported constant type");
}

llvm::CmpInst::Predicate integerPredicate(const std::string &name, const ir::Operation &op) {
  static const std::map<std::string, llvm::CmpInst::Predicate> table = {
      {"eq", llvm::CmpInst::ICMP_EQ},   {"ne", llvm::CmpInst::ICMP_NE},
      {"slt", llvm::CmpInst::ICMP_SLT}, {"sle", llvm::CmpInst::ICMP_SLE},
      {"sgt", llvm::CmpInst::ICMP_SGT}, {"sge", llvm::CmpInst::ICMP_SGE},
      {"ult", llvm::CmpInst::ICMP_ULT}, {"ule", llvm::CmpInst::ICMP_ULE},
      {"ugt", llvm::CmpInst::ICMP_UGT}, {"uge", llvm::CmpInst::ICMP_UGE}};
  auto it = table.find(name);
  if (it == table.end())
    ir::emitError(op, "codegen: unknown cmpi predicate '" + name + "'");
  return it->second;
}

llvm::CmpInst::Predicate floatPredicate(const std::string &name, const ir::Operation &op) {
  static const std::map<std::string, llvm::CmpInst::Predicate> table = {
      {"oeq", llvm::CmpInst::FCMP_OEQ}, {"one", llvm::CmpInst::FCMP_ONE},
      {"olt", llvm::CmpInst::FCMP_OLT}, {"ole", llvm::CmpInst::FCMP_OLE},
      {"ogt", llvm::CmpInst::FCMP_OGT}, {"oge", llvm::CmpInst::FCMP_OGE},
      {"ueq", llvm::CmpInst::FCMP_UEQ}, {"une", llvm::CmpInst::FCMP_UNE},
      {"ult", llvm::CmpInst::FCMP_ULT}, {"ule", llvm::CmpInst::FCMP_ULE},
      {"ugt", llvm::CmpInst::FCMP_UGT}, {"uge", llvm::CmpInst::FCMP_UGE},
      {"ord", llvm::CmpInst::FCMP_ORD}, {"uno", llvm::CmpInst::FCMP_UNO}};
  auto it = table.find(name);
  if (it == table.end())
    ir::emitError(op, "codegen: unknown cmpf predicate '" + name + "'");
  return it->second;
}

bool isFp8(const ir::Type &type) {
  ir::Type element = type.elementType();
  return element.isScalar() && ir::isFp8Kind(element.scalarKind());
}

/// The instruction for one register of an elementwise op; `args` are the operands' registers.
llvm::Value *emitElement(KernelLowering &lowering, const ir::Operation &op,
                         const std::vector<llvm::Value *> &args, llvm::Type *resultType) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto intrinsic = [&](llvm::Intrinsic::ID id) {
    return lowering.callIntrinsic(id, {args[0]->getType()}, {args[0], args[1]});
  };
  using ir::OpCode;
  switch (op.code()) {
  case OpCode::AddPtr: {
    // Offsets are signed element counts: GEP sign-extends them to the pointer width.
    llvm::Type *element = lowering.memoryType(op.operand(0)->type().elementType().pointee(), op);
    return b.CreateGEP(element, args[0], args[1]);
  }
  case OpCode::AddI: return b.CreateAdd(args[0], args[1]);
  case OpCode::SubI: return b.CreateSub(args[0], args[1]);
  case OpCode::MulI: return b.CreateMul(args[0], args[1]);
  case OpCode::DivSI: return b.CreateSDiv(args[0], args[1]);
  case OpCode::DivUI: return b.CreateUDiv(args[0], args[1]);
  case OpCode::RemSI: return b.CreateSRem(args[0], args[1]);
  case OpCode::RemUI: return b.CreateURem(args[0], args[1]);
  case OpCode::AndI: return b.CreateAnd(args[0], args[1]);
  case OpCode::OrI: return b.CreateOr(args[0], args[1]);
  case OpCode::XOrI: return b.CreateXor(args[0], args[1]);
  case OpCode::ShLI: return b.CreateShl(args[0], args[1]);
  case OpCode::ShRSI: return b.CreateAShr(args[0], args[1]);
  case OpCode::ShRUI: return b.CreateLShr(args[0], args[1]);
  case OpCode::MaxSI: return intrinsic(llvm::Intrinsic::smax);
  case OpCode::MinSI: return intrinsic(llvm::Intrinsic::smin);
  case OpCode::MaxUI: return intrinsic(llvm::Intrinsic::umax);
  case OpCode::MinUI: return intrinsic(llvm::Intrinsic::umin);
  case OpCode::CmpI:
    return b.CreateICmp(integerPredicate(op.stringAttr("predicate"), op), args[0], args[1]);
  case OpCode::AddF: return b.CreateFAdd(args[0], args[1]);
  case OpCode::SubF: return b.CreateFSub(args[0], args[1]);
  case OpCode::MulF: return b.CreateFMul(args[0], args[1]);
  case OpCode::DivF: return b.CreateFDiv(args[0], args[1]); // div.rn: correctly rounded
  case OpCode::RemF: return b.CreateFRem(args[0], args[1]);
  case OpCode::NegF: return b.CreateFNeg(args[0]);
  case OpCode::MaxNumF: return intrinsic(llvm::Intrinsic::maxnum);
  case OpCode::MinNumF: return intrinsic(llvm::Intrinsic::minnum);
  case OpCode::MaximumF: return intrinsic(llvm::Intrinsic::maximum);
  case OpCode::MinimumF: return intrinsic(llvm::Intrinsic::minimum);
  case OpCode::CmpF:
    return b.CreateFCmp(floatPredicate(op.stringAttr("predicate"), op), args[0], args[1]);
  case OpCode::Select: return b.CreateSelect(args[0], args[1], args[2]);
  case OpCode::ExtSI: return b.CreateSExt(args[0], resultType);
  case OpCode::ExtUI: return b.CreateZExt(args[0], resultType);
  case OpCode::TruncI: return b.CreateTrunc(args[0], resultType);
  case OpCode::ExtF:
  case OpCode::TruncF: return emitFloatConversion(lowering, op, args[0], resultType);
  case OpCode::SIToFP: return b.CreateSIToFP(args[0], resultType);
  case OpCode::UIToFP: return b.CreateUIToFP(args[0], resultType);
  case OpCode::FPToSI: return b.CreateFPToSI(args[0], resultType);
  case OpCode::FPToUI: return b.CreateFPToUI(args[0], resultType);
  case OpCode::Bitcast: return b.CreateBitCast(args[0], resultType);
  case OpCode::IntToPtr: return b.CreateIntToPtr(args[0], resultType);
  case OpCode::PtrToInt: return b.CreatePtrToInt(args[0], resultType);
  default:
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
  }
}

Registers lowerProgramIndex(KernelLowering &lowering, const ir::Operation &op) {
  static const llvm::Intrinsic::ID programIds[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  static const llvm::Intrinsic::ID gridSizes[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x,
                                                  llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                                  llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z};
  int64_t axis = op.intAttr("axis");
  if (axis < 0 || axis > 2)
    ir::emitError(op, "codegen: axis must be 0, 1 or 2");
  llvm::Value *index = lowering.callIntrinsic(
      op.code() == ir::OpCode::ProgramId ? programIds[axis] : gridSizes[axis], {}, {});
  llvm::Type *type = lowering.registerType(op.result()->type(), op);
  return {lowering.builder().CreateZExtOrTrunc(index, type)};
}

Registers lowerMakeRange(KernelLowering &lowering, const ir::Operation &op) {
  const LinearLayout &layout = lowering.layoutOf(op.result()->type(), op);
  llvm::Value *start = lowering.i32(op.intAttr("start"));
  Registers registers;
  for (const auto &index : lowering.emitIndices(layout))
    registers.push_back(lowering.builder().CreateAdd(index[0], start));
  return registers;
}

} // namespace

void lowerElementwiseOp(KernelLowering &lowering, const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Constant: {
    const ir::Type &type = op.result()->type();
    llvm::Constant *value = constantOf(op.attr("value"), lowering.registerType(type, op), op);
    lowering.setRegisters(op.result(), Registers(lowering.numRegisters(type, op), value));
    return;
  }
  case ir::OpCode::ProgramId:
  case ir::OpCode::NumPrograms:
    lowering.setRegisters(op.result(), lowerProgramIndex(lowering, op));
    return;
  case ir::OpCode::MakeRange:
    lowering.setRegisters(op.result(), lowerMakeRange(lowering, op));
    return;
  case ir::OpCode::InlineAsm:
    return lowerInlineAsm(lowering, op);
  default:
    break;
  }
  if (!op.hasTrait(ir::trait::ELEMENTWISE) || op.numResults() != 1)
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
  const ir::Type &resultType = op.result()->type();
  // fp8 values are held as raw bytes: ops that move bits and conversions (lower_fp8.cpp) work;
  // the front end computes fp8 arithmetic in f32.
  bool movesBits = op.code() == ir::OpCode::Bitcast || op.code() == ir::OpCode::Select ||
                   op.code() == ir::OpCode::ExtF || op.code() == ir::OpCode::TruncF;
  for (const ir::Value *operand : op.operands())
    if (!movesBits && (isFp8(operand->type()) || isFp8(resultType)))
      ir::emitError(op, std::string("codegen: '") + op.name() +
                            "' on fp8 values is not supported (convert to float32 first)");
  // Register i of each operand and of the result must be the same element.
  int numRegs = lowering.numRegisters(resultType, op);
  if (resultType.isTensor()) {
    const LinearLayout &layout = lowering.layoutOf(resultType, op);
    for (const ir::Value *operand : op.operands())
      if (lowering.layoutOf(operand->type(), op) != layout)
        ir::emitError(op, "codegen: operand layout " + operand->type().str() +
                              " differs from the result's " + resultType.str() +
                              " (a convert_layout is missing)");
  }
  llvm::Type *type = lowering.registerType(resultType, op);
  Registers result;
  for (int reg = 0; reg < numRegs; ++reg) {
    std::vector<llvm::Value *> args;
    for (const ir::Value *operand : op.operands())
      args.push_back(lowering.registersOf(operand)[reg]);
    result.push_back(emitElement(lowering, op, args, type));
  }
  lowering.setRegisters(op.result(), std::move(result));
}

} // namespace tessera::codegen
