// Float conversions that LLVM's fptrunc/fpext do not cover: the fp8 formats (held as their raw
// bytes in i8 registers) and narrowing toward zero (truncf {rounding = "rtz"}).
//
// Every fp8 format converts on every target through exact integer/float arithmetic: to fp8,
// |x| is clamped to the format's largest finite value (PTX's .satfinite: overflow and infinities
// saturate, NaN stays NaN), scaled by a power of two so that one unit is the format's quantum at
// x's exponent, rounded to an integer (rint: nearest even; trunc: toward zero) and the integer
// is the magnitude's code. From fp8, the code's fields give significand * 2^exponent exactly in
// f32. On sm_89+ e4m3/e5m2 use the hardware's cvt (.rn.satfinite e4m3x2/e5m2x2 from f32, and
// e4m3x2/e5m2x2 to f16x2), which give the same results.
//
// fp8e4b15 follows Triton's software conversion instead, bit for bit: from f16 (f32 first
// narrowed toward zero), |x| clamped to 1.75 and rounded half away from zero, sign copied.
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

namespace {

enum class Specials { FiniteNan, Ieee, Fnuz, None };

struct Fp8Format {
  int mantissa;
  int bias;
  double maxFinite;
  Specials specials; // FiniteNan: only 0x7f/0xff NaN; Ieee: inf and NaNs; Fnuz: 0x80 NaN, no -0
};

Fp8Format formatOf(ir::ScalarKind kind) {
  switch (kind) {
  case ir::ScalarKind::F8E4M3: return {3, 7, 448.0, Specials::FiniteNan};
  case ir::ScalarKind::F8E5M2: return {2, 15, 57344.0, Specials::Ieee};
  case ir::ScalarKind::F8E4M3FNUZ: return {3, 8, 240.0, Specials::Fnuz};
  case ir::ScalarKind::F8E5M2FNUZ: return {2, 16, 57344.0, Specials::Fnuz};
  case ir::ScalarKind::F8E4M3B15: return {3, 15, 1.75, Specials::None};
  default: return {0, 0, 0, Specials::None};
  }
}

/// One PTX instruction `text` ("cvt.rz.f16.f32 $0, $1;") on one operand.
llvm::Value *inlinePtx(llvm::IRBuilder<> &b, llvm::Type *result, llvm::Value *operand,
                       const char *text, const char *constraints) {
  auto *type = llvm::FunctionType::get(result, {operand->getType()}, false);
  return b.CreateCall(llvm::InlineAsm::get(type, text, constraints, /*hasSideEffects=*/false),
                      {operand});
}

/// f32 `value` narrowed toward zero to f16 or bf16 (f64 to f32), as PTX's cvt.rz.
llvm::Value *truncateTowardZero(llvm::IRBuilder<> &b, llvm::Value *value, llvm::Type *type) {
  if (value->getType()->isDoubleTy() && type->isFloatTy())
    return inlinePtx(b, type, value, "cvt.rz.f32.f64 $0, $1;", "=f,d");
  if (value->getType()->isDoubleTy()) // the front end goes through f32 (exact: rtz composes)
    value = truncateTowardZero(b, value, b.getFloatTy());
  if (!value->getType()->isFloatTy())
    value = b.CreateFPExt(value, b.getFloatTy());
  const char *text = type->isHalfTy() ? "cvt.rz.f16.f32 $0, $1;" : "cvt.rz.bf16.f32 $0, $1;";
  llvm::Value *bits = inlinePtx(b, b.getInt16Ty(), value, text, "=h,f");
  return b.CreateBitCast(bits, type);
}

/// 2^exponent as a float of `type` (f32 or f64), from an i32/i64 `exponent` in range.
llvm::Value *powerOfTwo(llvm::IRBuilder<> &b, llvm::Value *exponent, llvm::Type *type) {
  bool wide = type->isDoubleTy();
  llvm::Type *bitsType = wide ? b.getInt64Ty() : b.getInt32Ty();
  llvm::Value *biased = b.CreateAdd(b.CreateSExtOrTrunc(exponent, bitsType),
                                    llvm::ConstantInt::get(bitsType, wide ? 1023 : 127));
  return b.CreateBitCast(b.CreateShl(biased, wide ? 52 : 23), type);
}

/// A float (f16, bf16, f32 or f64) rounded to fp8 `format`: its i8 code.
llvm::Value *encodeGeneric(KernelLowering &lowering, llvm::Value *value, const Fp8Format &format,
                           bool towardZero) {
  llvm::IRBuilder<> &b = lowering.builder();
  if (!value->getType()->isDoubleTy() && !value->getType()->isFloatTy())
    value = b.CreateFPExt(value, b.getFloatTy()); // exact
  llvm::Type *type = value->getType();
  bool wide = type->isDoubleTy();
  llvm::Type *bitsType = wide ? b.getInt64Ty() : b.getInt32Ty();
  int fractionBits = wide ? 52 : 23, exponentBias = wide ? 1023 : 127;
  llvm::Value *bits = b.CreateBitCast(value, bitsType);
  llvm::Value *negative = b.CreateICmpSLT(bits, llvm::ConstantInt::get(bitsType, 0));
  llvm::Value *isNan = b.CreateFCmpUNO(value, value);
  llvm::Value *magnitude = lowering.callIntrinsic(llvm::Intrinsic::fabs, {type}, {value});
  magnitude = lowering.callIntrinsic(llvm::Intrinsic::minnum, {type},
                                     {magnitude, llvm::ConstantFP::get(type, format.maxFinite)});
  // The exponent of |x| (|x| normal in f32/f64 or tiny), no smaller than the format's least.
  llvm::Value *exponent =
      b.CreateTrunc(b.CreateSub(b.CreateLShr(b.CreateBitCast(magnitude, bitsType), fractionBits),
                                llvm::ConstantInt::get(bitsType, exponentBias)),
                    b.getInt32Ty());
  exponent = lowering.callIntrinsic(llvm::Intrinsic::smax, {b.getInt32Ty()},
                                    {exponent, b.getInt32(1 - format.bias)});
  llvm::Value *scaled = b.CreateFMul(
      magnitude, powerOfTwo(b, b.CreateSub(b.getInt32(format.mantissa), exponent), type));
  llvm::Value *units = lowering.callIntrinsic(
      towardZero ? llvm::Intrinsic::trunc : llvm::Intrinsic::rint, {type}, {scaled});
  // units is in [0, 2^(mantissa+1)]: the code of |x| is (exponent + bias - 1) << mantissa plus
  // units (a subnormal's code is units itself; a carry into the next binade adds up).
  llvm::Value *code =
      b.CreateAdd(b.CreateShl(b.CreateAdd(exponent, b.getInt32(format.bias - 1)), format.mantissa),
                  b.CreateFPToUI(units, b.getInt32Ty()));
  code = b.CreateTrunc(code, b.getInt8Ty());
  llvm::Value *signed_ = b.CreateOr(code, b.getInt8(0x80));
  if (format.specials == Specials::Fnuz) // no negative zero
    signed_ = b.CreateSelect(b.CreateICmpEQ(code, b.getInt8(0)), code, signed_);
  llvm::Value *result = b.CreateSelect(negative, signed_, code);
  llvm::Value *nan = format.specials == Specials::Fnuz
                         ? b.getInt8(0x80)
                         : b.CreateSelect(negative, b.getInt8(0xff), b.getInt8(0x7f));
  return b.CreateSelect(isNan, nan, result);
}

/// Triton's fp8e4b15 encoding (see the file comment).
llvm::Value *encodeE4B15(KernelLowering &lowering, llvm::Value *value) {
  llvm::IRBuilder<> &b = lowering.builder();
  if (!value->getType()->isHalfTy())
    value = truncateTowardZero(b, value, b.getHalfTy());
  llvm::Value *bits = b.CreateZExt(b.CreateBitCast(value, b.getInt16Ty()), b.getInt32Ty());
  // f16 magnitudes order as integers; NaN's bits exceed 1.75's, so NaN saturates as Triton's.
  llvm::Value *magnitude = lowering.callIntrinsic(llvm::Intrinsic::umin, {b.getInt32Ty()},
                                                  {b.CreateAnd(bits, 0x7fff), b.getInt32(0x3f00)});
  llvm::Value *code = b.CreateLShr(b.CreateAdd(b.CreateShl(magnitude, 1), b.getInt32(0x80)), 8);
  code = b.CreateOr(b.CreateAnd(code, 0x7f), b.CreateAnd(b.CreateLShr(bits, 8), 0x80));
  return b.CreateTrunc(code, b.getInt8Ty());
}

/// The f32 value of fp8 code `code` (i8) of `format`, exactly.
llvm::Value *decodeGeneric(KernelLowering &lowering, llvm::Value *code, const Fp8Format &format) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Type *f32 = b.getFloatTy();
  llvm::Value *word = b.CreateZExt(code, b.getInt32Ty());
  llvm::Value *magnitude = b.CreateAnd(word, 0x7f);
  llvm::Value *exponent = b.CreateLShr(magnitude, format.mantissa);
  llvm::Value *fraction = b.CreateAnd(magnitude, (1 << format.mantissa) - 1);
  llvm::Value *isSubnormal = b.CreateICmpEQ(exponent, b.getInt32(0));
  llvm::Value *significand =
      b.CreateSelect(isSubnormal, fraction, b.CreateOr(fraction, 1 << format.mantissa));
  llvm::Value *scaleExponent = b.CreateSub(b.CreateSelect(isSubnormal, b.getInt32(1), exponent),
                                           b.getInt32(format.bias + format.mantissa));
  llvm::Value *value =
      b.CreateFMul(b.CreateUIToFP(significand, f32), powerOfTwo(b, scaleExponent, f32));
  llvm::Value *nan = llvm::ConstantFP::getNaN(f32);
  switch (format.specials) {
  case Specials::FiniteNan:
    value = b.CreateSelect(b.CreateICmpEQ(magnitude, b.getInt32(0x7f)), nan, value);
    break;
  case Specials::Ieee: {
    llvm::Value *top = b.CreateICmpEQ(exponent, b.getInt32((0x7f >> format.mantissa)));
    llvm::Value *special = b.CreateSelect(b.CreateICmpEQ(fraction, b.getInt32(0)),
                                          llvm::ConstantFP::getInfinity(f32), nan);
    value = b.CreateSelect(top, special, value);
    break;
  }
  case Specials::Fnuz:
    value = b.CreateSelect(b.CreateICmpEQ(word, b.getInt32(0x80)), nan, value);
    break;
  case Specials::None: break;
  }
  llvm::Value *negative = b.CreateICmpUGE(word, b.getInt32(0x80)); // fnuz: 0x80 stays NaN
  return b.CreateSelect(negative, b.CreateFNeg(value), value);
}

/// sm_89+: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 on (0, x); the low byte is x's code.
llvm::Value *encodeHardware(KernelLowering &lowering, llvm::Value *value, ir::ScalarKind kind) {
  llvm::IRBuilder<> &b = lowering.builder();
  if (!value->getType()->isFloatTy())
    value = b.CreateFPExt(value, b.getFloatTy()); // f16 / bf16: exact
  llvm::Intrinsic::ID id = kind == ir::ScalarKind::F8E4M3 ? llvm::Intrinsic::nvvm_ff_to_e4m3x2_rn
                                                          : llvm::Intrinsic::nvvm_ff_to_e5m2x2_rn;
  llvm::Value *pair =
      lowering.callIntrinsic(id, {}, {llvm::ConstantFP::get(b.getFloatTy(), 0.0), value});
  return b.CreateTrunc(pair, b.getInt8Ty());
}

/// sm_89+: cvt.rn.f16x2.{e4m3x2,e5m2x2} on the code's byte pair; element 0 is the code's value.
llvm::Value *decodeHardware(KernelLowering &lowering, llvm::Value *code, ir::ScalarKind kind) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Intrinsic::ID id = kind == ir::ScalarKind::F8E4M3
                               ? llvm::Intrinsic::nvvm_e4m3x2_to_f16x2_rn
                               : llvm::Intrinsic::nvvm_e5m2x2_to_f16x2_rn;
  llvm::Value *pair = lowering.callIntrinsic(id, {}, {b.CreateZExt(code, b.getInt16Ty())});
  return b.CreateExtractElement(pair, uint64_t(0));
}

bool hasHardwareFp8(const KernelLowering &lowering, ir::ScalarKind kind) {
  return lowering.smVersion() >= 89 &&
         (kind == ir::ScalarKind::F8E4M3 || kind == ir::ScalarKind::F8E5M2);
}

} // namespace

llvm::Value *emitFloatConversion(KernelLowering &lowering, const ir::Operation &op,
                                 llvm::Value *value, llvm::Type *resultType) {
  llvm::IRBuilder<> &b = lowering.builder();
  ir::ScalarKind from = op.operand(0)->type().elementType().scalarKind();
  ir::ScalarKind to = op.result()->type().elementType().scalarKind();
  bool towardZero = op.hasAttr("rounding") && op.stringAttr("rounding") == "rtz";
  if (op.hasAttr("rounding") && !towardZero && op.stringAttr("rounding") != "rtne")
    ir::emitError(op, "codegen: unknown rounding mode '" + op.stringAttr("rounding") + "'");
  if (ir::isFp8Kind(from) && ir::isFp8Kind(to))
    ir::emitError(op, "codegen: fp8 to fp8 conversions go through f32 (the front end's cast)");
  if (ir::isFp8Kind(from)) {
    llvm::Value *wide = hasHardwareFp8(lowering, from)
                            ? decodeHardware(lowering, value, from)
                            : decodeGeneric(lowering, value, formatOf(from));
    if (wide->getType() == resultType)
      return wide;
    if (!wide->getType()->isFloatTy())
      wide = b.CreateFPExt(wide, b.getFloatTy());
    if (resultType->isFloatTy())
      return wide;
    return resultType->isDoubleTy() ? b.CreateFPExt(wide, resultType)
                                    : b.CreateFPTrunc(wide, resultType); // exact: fp8 fits
  }
  if (ir::isFp8Kind(to)) {
    if (to == ir::ScalarKind::F8E4M3B15)
      return encodeE4B15(lowering, value);
    if (!towardZero && hasHardwareFp8(lowering, to) && !value->getType()->isDoubleTy())
      return encodeHardware(lowering, value, to);
    return encodeGeneric(lowering, value, formatOf(to), towardZero);
  }
  if (op.code() == ir::OpCode::TruncF && towardZero)
    return truncateTowardZero(b, value, resultType);
  return op.code() == ir::OpCode::TruncF ? b.CreateFPTrunc(value, resultType)
                                         : b.CreateFPExt(value, resultType);
}

} // namespace tessera::codegen
