// Lowering of the ops that compute each register independently: constants, program ids,
// make_range, addptr, integer and float arithmetic, compares, select and casts.
//
// An elementwise op on tensors applies its LLVM instruction register by register; operands
// share the result's layout (the layout passes insert convert_layout otherwise), so register
// i of every operand holds the same element. make_range is the one op that reads the layout:
// register i holds element start + L(i, lane, warp).
#include "codegen/lower_debug.h"
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <map>

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

/// One register of an elementwise op: the op, its operands' registers and the result type.
struct Element {
  KernelLowering &lowering;
  const ir::Operation &op;
  const std::vector<llvm::Value *> &args;
  llvm::Type *resultType;

  llvm::IRBuilder<> &b() const { return lowering.builder(); }
  llvm::Value *intrinsic(llvm::Intrinsic::ID id) const {
    return lowering.callIntrinsic(id, {args[0]->getType()}, {args[0], args[1]});
  }
};
using ElementFn = llvm::Value *(*)(const Element &e);

/// The instruction per element of each elementwise op, by op code (null: not elementwise here).
const std::array<ElementFn, ir::kNumOpCodes> &elementTable() {
  static const std::array<ElementFn, ir::kNumOpCodes> table = [] {
    std::array<ElementFn, ir::kNumOpCodes> t{};
    using ir::OpCode;
    auto set = [&](OpCode code, ElementFn fn) { t[static_cast<size_t>(code)] = fn; };
    set(OpCode::AddPtr, [](const Element &e) -> llvm::Value * {
      // Offsets are signed element counts: GEP sign-extends them to the pointer width.
      llvm::Type *element =
          e.lowering.memoryType(e.op.operand(0)->type().elementType().pointee(), e.op);
      return e.b().CreateGEP(element, e.args[0], e.args[1]);
    });
    set(OpCode::AddI, [](const Element &e) { return e.b().CreateAdd(e.args[0], e.args[1]); });
    set(OpCode::SubI, [](const Element &e) { return e.b().CreateSub(e.args[0], e.args[1]); });
    set(OpCode::MulI, [](const Element &e) { return e.b().CreateMul(e.args[0], e.args[1]); });
    set(OpCode::DivSI, [](const Element &e) { return e.b().CreateSDiv(e.args[0], e.args[1]); });
    set(OpCode::DivUI, [](const Element &e) { return e.b().CreateUDiv(e.args[0], e.args[1]); });
    set(OpCode::RemSI, [](const Element &e) { return e.b().CreateSRem(e.args[0], e.args[1]); });
    set(OpCode::RemUI, [](const Element &e) { return e.b().CreateURem(e.args[0], e.args[1]); });
    set(OpCode::AndI, [](const Element &e) { return e.b().CreateAnd(e.args[0], e.args[1]); });
    set(OpCode::OrI, [](const Element &e) { return e.b().CreateOr(e.args[0], e.args[1]); });
    set(OpCode::XOrI, [](const Element &e) { return e.b().CreateXor(e.args[0], e.args[1]); });
    set(OpCode::ShLI, [](const Element &e) { return e.b().CreateShl(e.args[0], e.args[1]); });
    set(OpCode::ShRSI, [](const Element &e) { return e.b().CreateAShr(e.args[0], e.args[1]); });
    set(OpCode::ShRUI, [](const Element &e) { return e.b().CreateLShr(e.args[0], e.args[1]); });
    set(OpCode::MaxSI, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::smax); });
    set(OpCode::MinSI, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::smin); });
    set(OpCode::MaxUI, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::umax); });
    set(OpCode::MinUI, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::umin); });
    set(OpCode::CmpI, [](const Element &e) {
      return e.b().CreateICmp(integerPredicate(e.op.stringAttr("predicate"), e.op), e.args[0],
                              e.args[1]);
    });
    set(OpCode::AddF, [](const Element &e) { return e.b().CreateFAdd(e.args[0], e.args[1]); });
    set(OpCode::SubF, [](const Element &e) { return e.b().CreateFSub(e.args[0], e.args[1]); });
    set(OpCode::MulF, [](const Element &e) { return e.b().CreateFMul(e.args[0], e.args[1]); });
    set(OpCode::DivF, [](const Element &e) { // div.rn: correctly rounded
      return e.b().CreateFDiv(e.args[0], e.args[1]);
    });
    set(OpCode::RemF, [](const Element &e) { return e.b().CreateFRem(e.args[0], e.args[1]); });
    set(OpCode::NegF, [](const Element &e) { return e.b().CreateFNeg(e.args[0]); });
    set(OpCode::MaxNumF, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::maxnum); });
    set(OpCode::MinNumF, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::minnum); });
    set(OpCode::MaximumF, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::maximum); });
    set(OpCode::MinimumF, [](const Element &e) { return e.intrinsic(llvm::Intrinsic::minimum); });
    set(OpCode::CmpF, [](const Element &e) {
      return e.b().CreateFCmp(floatPredicate(e.op.stringAttr("predicate"), e.op), e.args[0],
                              e.args[1]);
    });
    set(OpCode::Select,
        [](const Element &e) { return e.b().CreateSelect(e.args[0], e.args[1], e.args[2]); });
    set(OpCode::ExtSI, [](const Element &e) { return e.b().CreateSExt(e.args[0], e.resultType); });
    set(OpCode::ExtUI, [](const Element &e) { return e.b().CreateZExt(e.args[0], e.resultType); });
    set(OpCode::TruncI,
        [](const Element &e) { return e.b().CreateTrunc(e.args[0], e.resultType); });
    for (OpCode code : {OpCode::ExtF, OpCode::TruncF})
      set(code, [](const Element &e) {
        return emitFloatConversion(e.lowering, e.op, e.args[0], e.resultType);
      });
    set(OpCode::SIToFP,
        [](const Element &e) { return e.b().CreateSIToFP(e.args[0], e.resultType); });
    set(OpCode::UIToFP,
        [](const Element &e) { return e.b().CreateUIToFP(e.args[0], e.resultType); });
    set(OpCode::FPToSI,
        [](const Element &e) { return e.b().CreateFPToSI(e.args[0], e.resultType); });
    set(OpCode::FPToUI,
        [](const Element &e) { return e.b().CreateFPToUI(e.args[0], e.resultType); });
    set(OpCode::Bitcast,
        [](const Element &e) { return e.b().CreateBitCast(e.args[0], e.resultType); });
    set(OpCode::IntToPtr,
        [](const Element &e) { return e.b().CreateIntToPtr(e.args[0], e.resultType); });
    set(OpCode::PtrToInt,
        [](const Element &e) { return e.b().CreatePtrToInt(e.args[0], e.resultType); });
    return t;
  }();
  return table;
}

/// The instruction for one register of an elementwise op; `args` are the operands' registers.
llvm::Value *emitElement(KernelLowering &lowering, const ir::Operation &op,
                         const std::vector<llvm::Value *> &args, llvm::Type *resultType) {
  ElementFn fn = elementTable()[static_cast<size_t>(op.code())];
  if (!fn)
    ir::emitError(op, std::string("codegen: no lowering for op '") + op.name() + "'");
  return fn(Element{lowering, op, args, resultType});
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

/// For each register of `op`'s result, the register whose value it takes: itself, or an
/// earlier register of the same thread holding an element of the same run of equal values
/// (axis info's constancy, runs aligned to their length). The op is computed once per run
/// (Triton's deduplication of elementwise ops): a mask `start + offs < n` whose runs span a
/// thread's columns costs one compare per run, not per column. Layouts are linear over
/// XOR, so an element's run, its coordinate >> log2(run length) per dim, is the register's
/// part of that coordinate XOR the thread's part: two registers share a run in every thread
/// exactly when their own parts agree above the run length's bits.
std::vector<int> runRepresentatives(KernelLowering &lowering, const ir::Operation &op,
                                    int numRegs) {
  std::vector<int> representative(numRegs);
  for (int reg = 0; reg < numRegs; ++reg)
    representative[reg] = reg;
  const ir::Type &type = op.result()->type();
  bool pure = op.code() != ir::OpCode::ExternElementwise || op.flagAttr("pure");
  if (!type.isTensor() || !pure || numRegs < 2 || op.flagAttr("check_overflow"))
    return representative;
  const std::vector<int64_t> &constancy =
      lowering.axisInfo().get(const_cast<ir::Value *>(op.result())).constancy;
  if (std::all_of(constancy.begin(), constancy.end(), [](int64_t c) { return c <= 1; }))
    return representative;
  const LinearLayout &layout = lowering.layoutOf(type, op);
  if (layout.getInDimSize(kRegisterDim) != numRegs ||
      static_cast<size_t>(layout.getNumOutDims()) != constancy.size())
    return representative;
  std::map<std::vector<int32_t>, int> first; // run key -> its first register
  for (int reg = 0; reg < numRegs; ++reg) {
    std::vector<int32_t> key;
    int d = 0;
    for (const auto &[dim, coordinate] : layout.apply({{kRegisterDim, reg}})) {
      int shift = 0; // log2 of the run length (a power of two, axis_info.h)
      while ((int64_t(2) << shift) <= constancy[d])
        ++shift;
      key.push_back(coordinate >> shift);
      ++d;
    }
    representative[reg] = first.emplace(key, reg).first->second;
  }
  return representative;
}

} // namespace

bool hasElementLowering(ir::OpCode code) {
  return elementTable()[static_cast<size_t>(code)] != nullptr;
}

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
  case ir::OpCode::InlineAsm: return lowerInlineAsm(lowering, op);
  default: break;
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
  bool checked = op.flagAttr("check_overflow"); // transforms/check_offsets.cpp (debug)
  llvm::Value *overflowed = nullptr;
  Registers result;
  std::vector<int> representative = runRepresentatives(lowering, op, numRegs);
  for (int reg = 0; reg < numRegs; ++reg) {
    if (representative[reg] != reg) { // an element of a run computed already
      result.push_back(result[representative[reg]]);
      continue;
    }
    std::vector<llvm::Value *> args;
    for (const ir::Value *operand : op.operands())
      args.push_back(lowering.registersOf(operand)[reg]);
    result.push_back(checked ? emitCheckedArithmetic(lowering, op, args[0], args[1], overflowed)
                             : emitElement(lowering, op, args, type));
  }
  if (checked)
    emitOverflowAssert(lowering, op, overflowed);
  lowering.setRegisters(op.result(), std::move(result));
}

} // namespace tessera::codegen
