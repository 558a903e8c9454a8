// Lowering of the math ops (ops.def, "math"): a PTX fast path through an NVVM intrinsic where
// Triton uses one, libdevice (__nv_* functions, linked by libdevice.cpp) for the rest.
//
//   op            f32                                      f64
//   exp           ex2.approx.f32(x * log2(e))              __nv_exp
//   exp2          ex2.approx.ftz.f32                       __nv_exp2
//   log, log2     __nv_logf, __nv_log2f                    __nv_log, __nv_log2
//   sqrt          sqrt.approx.ftz.f32                      sqrt.rn.f64
//   precise_sqrt  sqrt.rn.f32                              sqrt.rn.f64
//   rsqrt         rsqrt.approx.ftz.f32                     rsqrt.approx.f64
//   sin, cos      __nv_sinf, __nv_cosf                     __nv_sin, __nv_cos
//   erf, tanh     __nv_erff, __nv_tanhf                    __nv_erf, __nv_tanh
//   fast_divf     div.full.f32                             div.rn.f64
//   floor, ceil, absf, absi, fma: LLVM's intrinsics (cvt.rmi/rpi, abs, fma.rn); mulhiui: mul.hi.
//   extern_elementwise: a call of its symbol (any element types), e.g. libdevice's functions.
// The f32 fast paths are Triton 3.6's (its PTX for sm_90): exp keeps denormals (ex2.approx.f32),
// while exp2, sqrt and rsqrt flush them (.ftz: a denormal input reads as 0, a denormal result
// is 0). Without .ftz ptxas wraps each ex2 in a range fix-up (a compare, two multiplies, a
// select): in an attention's softmax, where exp2 runs on every score, that was 150 of the 580
// SASS instructions of the loop. log/log2 use libdevice: lg2.approx.f32 has an absolute error
// bound, which near x = 1 is a large relative error.
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cmath>

namespace tessera::codegen {

namespace {

struct LibdeviceNames {
  ir::OpCode code;
  const char *f32;
  const char *f64;
};

// Ops computed by a libdevice function; an empty name means a fast path below handles it.
const LibdeviceNames kLibdevice[] = {
    {ir::OpCode::Exp, "", "__nv_exp"},          {ir::OpCode::Exp2, "", "__nv_exp2"},
    {ir::OpCode::Log, "__nv_logf", "__nv_log"}, {ir::OpCode::Log2, "__nv_log2f", "__nv_log2"},
    {ir::OpCode::Sin, "__nv_sinf", "__nv_sin"}, {ir::OpCode::Cos, "__nv_cosf", "__nv_cos"},
    {ir::OpCode::Erf, "__nv_erff", "__nv_erf"}, {ir::OpCode::Tanh, "__nv_tanhf", "__nv_tanh"},
};

/// A call of the external function `name` returning `resultType`. A pure one is declared so
/// that LLVM may CSE, hoist or drop it like an instruction. libdevice.cpp links the body in
/// before optimization (libdevice's __nv_* functions, or the op's lib_path).
llvm::Value *callExtern(KernelLowering &lowering, const std::string &name,
                        llvm::ArrayRef<llvm::Value *> args, llvm::Type *resultType,
                        bool pure = true) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Module *module = b.GetInsertBlock()->getModule();
  std::vector<llvm::Type *> types;
  for (llvm::Value *arg : args)
    types.push_back(arg->getType());
  auto *type = llvm::FunctionType::get(resultType, types, false);
  llvm::Function *existing = module->getFunction(name);
  if (existing && existing->getFunctionType() != type)
    throw ir::CompileError("codegen: extern function " + name +
                           " is called with two different signatures");
  llvm::FunctionCallee callee = module->getOrInsertFunction(name, type);
  if (auto *function = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    function->setDoesNotThrow();
    function->setWillReturn();
    if (pure)
      function->setDoesNotAccessMemory();
  }
  return b.CreateCall(callee, args);
}

llvm::Value *callLibdevice(KernelLowering &lowering, const char *name,
                           llvm::ArrayRef<llvm::Value *> args) {
  return callExtern(lowering, name, args, args[0]->getType());
}

/// extern_elementwise: the call, per register; a lib_path other than libdevice's is recorded
/// in the module's "tessera.extern_libs" metadata for libdevice.cpp to link.
llvm::Value *emitExtern(KernelLowering &lowering, const ir::Operation &op,
                        llvm::ArrayRef<llvm::Value *> args) {
  llvm::Type *resultType = lowering.registerType(op.result()->type(), op);
  if (op.hasAttr("lib_path") && !op.stringAttr("lib_path").empty()) {
    llvm::Module *module = lowering.builder().GetInsertBlock()->getModule();
    llvm::NamedMDNode *libs = module->getOrInsertNamedMetadata("tessera.extern_libs");
    const std::string &path = op.stringAttr("lib_path");
    bool known = false;
    for (llvm::MDNode *node : libs->operands())
      known |= llvm::cast<llvm::MDString>(node->getOperand(0))->getString() == path;
    if (!known)
      libs->addOperand(llvm::MDNode::get(module->getContext(),
                                         {llvm::MDString::get(module->getContext(), path)}));
  }
  return callExtern(lowering, op.stringAttr("symbol"), args, resultType, op.flagAttr("pure"));
}

const char *libdeviceName(const ir::Operation &op, bool isF64) {
  for (const LibdeviceNames &entry : kLibdevice)
    if (entry.code == op.code()) {
      const char *name = isF64 ? entry.f64 : entry.f32;
      return *name ? name : nullptr;
    }
  return nullptr;
}

/// One register of the result; `args` are the operands' registers.
llvm::Value *emitMath(KernelLowering &lowering, const ir::Operation &op,
                      llvm::ArrayRef<llvm::Value *> args) {
  if (op.code() == ir::OpCode::ExternElementwise)
    return emitExtern(lowering, op, args);
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Type *type = args[0]->getType();
  bool isF64 = type->isDoubleTy();
  if (const char *name = libdeviceName(op, isF64))
    return callLibdevice(lowering, name, args);
  auto intrinsic = [&](llvm::Intrinsic::ID id, bool overloaded = true) {
    return lowering.callIntrinsic(
        id, overloaded ? llvm::ArrayRef<llvm::Type *>(type) : llvm::ArrayRef<llvm::Type *>(), args);
  };
  using ir::OpCode;
  switch (op.code()) {
  case OpCode::Exp: { // f32 (f64 went to libdevice): 2^(x * log2 e), as Triton
    llvm::Value *scaled = b.CreateFMul(args[0], llvm::ConstantFP::get(type, M_LOG2E));
    return lowering.callIntrinsic(llvm::Intrinsic::nvvm_ex2_approx, {type}, {scaled});
  }
  case OpCode::Exp2: return intrinsic(llvm::Intrinsic::nvvm_ex2_approx_ftz);
  case OpCode::Sqrt:
    return isF64 ? intrinsic(llvm::Intrinsic::sqrt)
                 : intrinsic(llvm::Intrinsic::nvvm_sqrt_approx_ftz_f, false);
  case OpCode::PreciseSqrt:
    return isF64 ? intrinsic(llvm::Intrinsic::sqrt)
                 : intrinsic(llvm::Intrinsic::nvvm_sqrt_rn_f, false);
  case OpCode::Rsqrt:
    return intrinsic(isF64 ? llvm::Intrinsic::nvvm_rsqrt_approx_d
                           : llvm::Intrinsic::nvvm_rsqrt_approx_ftz_f,
                     false);
  case OpCode::FastDivF: // div.full.f32 (2 ulp), or div.rn where KernelLowering says so
    return isF64 || !lowering.fastDivision()
               ? b.CreateFDiv(args[0], args[1]) // div.rn.f64: there is no faster f64 path
               : intrinsic(llvm::Intrinsic::nvvm_div_full, false);
  case OpCode::Floor: return intrinsic(llvm::Intrinsic::floor);
  case OpCode::Ceil: return intrinsic(llvm::Intrinsic::ceil);
  case OpCode::AbsF: return intrinsic(llvm::Intrinsic::fabs);
  case OpCode::AbsI: // abs(INT_MIN) = INT_MIN (is_int_min_poison = false)
    return lowering.callIntrinsic(llvm::Intrinsic::abs, {type}, {args[0], b.getFalse()});
  case OpCode::Fma: return intrinsic(llvm::Intrinsic::fma);
  case OpCode::MulHiUI:
    return intrinsic(type->isIntegerTy(64) ? llvm::Intrinsic::nvvm_mulhi_ull
                                           : llvm::Intrinsic::nvvm_mulhi_ui,
                     false);
  default: ir::emitError(op, std::string("codegen: no math lowering for op '") + op.name() + "'");
  }
}

} // namespace

void lowerMathOp(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &resultType = op.result()->type();
  ir::Type element = resultType.elementType();
  bool isFloatOp = op.code() != ir::OpCode::AbsI && op.code() != ir::OpCode::MulHiUI &&
                   op.code() != ir::OpCode::AbsF && op.code() != ir::OpCode::ExternElementwise;
  if (isFloatOp && element.scalarKind() != ir::ScalarKind::F32 &&
      element.scalarKind() != ir::ScalarKind::F64)
    ir::emitError(op, std::string("codegen: ") + op.name() + " takes f32 or f64, got " +
                          resultType.str());
  int numRegs = lowering.numRegisters(resultType, op);
  if (resultType.isTensor()) { // register i of every operand holds the result's element i
    const LinearLayout &layout = lowering.layoutOf(resultType, op);
    for (const ir::Value *operand : op.operands())
      if (lowering.layoutOf(operand->type(), op) != layout)
        ir::emitError(op, "codegen: operand layout " + operand->type().str() +
                              " differs from the result's " + resultType.str());
  }
  Registers result;
  for (int reg = 0; reg < numRegs; ++reg) {
    std::vector<llvm::Value *> args;
    for (const ir::Value *operand : op.operands())
      args.push_back(lowering.registersOf(operand)[reg]);
    result.push_back(emitMath(lowering, op, args));
  }
  lowering.setRegisters(op.result(), std::move(result));
}

} // namespace tessera::codegen
