// Lowering of dot (tensor cores or FMA) and trans, the register-level half of the matrix ops
// (the shared-memory half: lower_shared_buffers.cpp).
//
// mma.sync: the schedule (layout/mma_schedule.h) lists, for each k step, m tile and n tile,
// the registers of each fragment; pack them into 32-bit words (f16x2, bf16x2, tf32, s8x4) and
//   mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32  (f16 also .f16 accumulate)
//   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
//   mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (kWidth 4: the f16 fragments, k scaled)
// tf32 rounds each input once (cvt.rna.tf32.f32); tf32x3 splits x = big + small and adds
// small*big + big*small + big*big. FMA ("ieee" f32, f64): per accumulator element, fma over
// K in order.
#include "codegen/lower_matrix.h"

#include "ir/diagnostics.h"
#include "layout/dot_operand.h"
#include "layout/mma.h"
#include "layout/mma_schedule.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <map>

namespace tessera::codegen {

Coords coordsOf(const LinearLayout &layout, int reg) {
  Coords coords;
  for (const auto &entry : layout.apply({{kRegisterDim, reg}}))
    coords.push_back(entry.second);
  return coords;
}

std::map<Coords, int> registersByCoords(const LinearLayout &layout) {
  std::map<Coords, int> map;
  for (int reg = layout.getInDimSize(kRegisterDim); reg-- > 0;)
    map[coordsOf(layout, reg)] = reg;
  return map;
}

namespace {

int lookup(const std::map<Coords, int> &map, const Coords &coords, const ir::Operation &op) {
  auto it = map.find(coords);
  if (it == map.end())
    ir::emitError(op, "codegen: internal error: no register holds element (" +
                          std::to_string(coords[0]) + ", " + std::to_string(coords[1]) + ")");
  return it->second;
}

enum class InputKind { F16, BF16, Tf32, I8 };

/// The 32-bit words of a fragment: pairs of 16-bit elements, single tf32 elements, or four
/// int8 elements (lowest k in the low byte).
std::vector<llvm::Value *> packWords(KernelLowering &lowering, InputKind kind,
                                     const std::vector<llvm::Value *> &elements) {
  llvm::IRBuilder<> &b = lowering.builder();
  std::vector<llvm::Value *> words;
  if (kind == InputKind::Tf32) {
    for (llvm::Value *element : elements)
      words.push_back(b.CreateBitCast(element, b.getInt32Ty()));
    return words;
  }
  if (kind == InputKind::I8) {
    auto *quad = llvm::FixedVectorType::get(b.getInt8Ty(), 4);
    for (size_t i = 0; i < elements.size(); i += 4) {
      llvm::Value *word = llvm::PoisonValue::get(quad);
      for (unsigned j = 0; j < 4; ++j)
        word = b.CreateInsertElement(word, elements[i + j], uint64_t(j));
      words.push_back(b.CreateBitCast(word, b.getInt32Ty()));
    }
    return words;
  }
  llvm::Type *half = kind == InputKind::F16 ? b.getHalfTy() : b.getBFloatTy();
  auto *pair = llvm::FixedVectorType::get(half, 2);
  for (size_t i = 0; i < elements.size(); i += 2) {
    llvm::Value *word = llvm::PoisonValue::get(pair);
    word = b.CreateInsertElement(word, elements[i], uint64_t(0));
    word = b.CreateInsertElement(word, elements[i + 1], uint64_t(1));
    words.push_back(kind == InputKind::F16 ? word : b.CreateBitCast(word, b.getInt32Ty()));
  }
  return words;
}

/// cvt.rna.tf32.f32, returned as the f32 whose bits it is.
llvm::Value *roundToTf32(KernelLowering &lowering, llvm::Value *value) {
  llvm::Value *bits = lowering.callIntrinsic(llvm::Intrinsic::nvvm_f2tf32_rna, {}, {value});
  return lowering.builder().CreateBitCast(bits, lowering.builder().getFloatTy());
}

/// A dot operand's registers as the mma steps ask for them: lazily made ones (ldmatrix at
/// first use) or the value's, each rounded to tf32 once when asked (and split for tf32x3).
class OperandRegisters {
public:
  OperandRegisters(KernelLowering &lowering, const ir::Value *value, bool tf32, bool split)
      : lowering_(lowering), lazy_(lowering.lazyRegistersOf(value)),
        eager_(lazy_ ? nullptr : &lowering.registersOf(value)), tf32_(tf32), split_(split) {}

  llvm::Value *get(int reg, bool small) {
    if (!tf32_)
      return raw(reg);
    if (big_.size() <= static_cast<size_t>(reg)) {
      big_.resize(reg + 1, nullptr);
      small_.resize(reg + 1, nullptr);
    }
    if (!big_[reg]) {
      llvm::Value *value = raw(reg);
      big_[reg] = roundToTf32(lowering_, value);
      if (split_)
        small_[reg] = roundToTf32(lowering_, lowering_.builder().CreateFSub(value, big_[reg]));
    }
    return small ? small_[reg] : big_[reg];
  }

private:
  llvm::Value *raw(int reg) { return lazy_ ? (*lazy_)(reg) : (*eager_)[reg]; }

  KernelLowering &lowering_;
  const KernelLowering::RegisterMaker *lazy_;
  const Registers *eager_;
  bool tf32_, split_;
  std::vector<llvm::Value *> big_, small_;
};

struct MmaCall {
  llvm::Intrinsic::ID id;
  bool halfAccumulator; // c/d as two f16x2 words instead of four f32
};

MmaCall mmaCallFor(InputKind kind, bool halfAccumulator) {
  switch (kind) {
  case InputKind::F16:
    return {halfAccumulator ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f16_f16
                            : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32,
            halfAccumulator};
  case InputKind::BF16: return {llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16, false};
  case InputKind::Tf32: return {llvm::Intrinsic::nvvm_mma_m16n8k8_row_col_tf32, false};
  case InputKind::I8: // int32 sums wrap, as the FMA path's and Triton's
    return {llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8, false};
  }
  return {llvm::Intrinsic::not_intrinsic, false};
}

/// accumulator = a * b + accumulator for one instruction tile (4 accumulator elements).
void emitMma(KernelLowering &lowering, const MmaCall &call, const std::vector<llvm::Value *> &a,
             const std::vector<llvm::Value *> &b, std::vector<llvm::Value *> &accumulator) {
  llvm::IRBuilder<> &builder = lowering.builder();
  std::vector<llvm::Value *> args(a);
  args.insert(args.end(), b.begin(), b.end());
  if (call.halfAccumulator) {
    auto *pair = llvm::FixedVectorType::get(builder.getHalfTy(), 2);
    for (int w = 0; w < 2; ++w) {
      llvm::Value *word = llvm::PoisonValue::get(pair);
      word = builder.CreateInsertElement(word, accumulator[2 * w], uint64_t(0));
      word = builder.CreateInsertElement(word, accumulator[2 * w + 1], uint64_t(1));
      args.push_back(word);
    }
  } else {
    args.insert(args.end(), accumulator.begin(), accumulator.end());
  }
  llvm::Value *result = lowering.callIntrinsic(call.id, {}, args);
  for (unsigned i = 0; i < 4; ++i) {
    if (call.halfAccumulator)
      accumulator[i] = builder.CreateExtractElement(builder.CreateExtractValue(result, {i / 2}),
                                                    uint64_t(i % 2));
    else
      accumulator[i] = builder.CreateExtractValue(result, {i});
  }
}

void lowerMmaDot(KernelLowering &lowering, const ir::Operation &op, const MmaEncoding &mma) {
  const ir::Type &aType = op.operand(0)->type(), &bType = op.operand(1)->type(),
                 &cType = op.result()->type();
  const auto &aEncoding = static_cast<const DotOperandEncoding &>(*aType.encoding());
  ir::ScalarKind inputKind = aType.scalarKind();
  InputKind kind = inputKind == ir::ScalarKind::F16    ? InputKind::F16
                   : inputKind == ir::ScalarKind::BF16 ? InputKind::BF16
                   : inputKind == ir::ScalarKind::I8   ? InputKind::I8
                                                       : InputKind::Tf32;
  std::string precision = op.hasAttr("input_precision") ? op.stringAttr("input_precision") : "tf32";
  if (kind == InputKind::Tf32 && precision == "ieee")
    ir::emitError(op, "codegen: an \"ieee\" f32 dot runs on FMA units (accelerate_matmul)");
  MmaCall call = mmaCallFor(kind, cType.scalarKind() == ir::ScalarKind::F16);

  // Operand registers, made on first use (lazily read from shared memory, or as given),
  // rounded to tf32 (big) with their remainders (small) for tf32x3.
  bool split = kind == InputKind::Tf32 && precision == "tf32x3";
  OperandRegisters a(lowering, op.operand(0), kind == InputKind::Tf32, split);
  OperandRegisters b(lowering, op.operand(1), kind == InputKind::Tf32, split);

  MmaSchedule schedule =
      scheduleMma(lowering.layoutOf(aType, op), lowering.layoutOf(bType, op),
                  lowering.layoutOf(cType, op), mma.getWarpsPerCTA(), aEncoding.getKWidth());
  auto words = [&](OperandRegisters &operand, const std::vector<int> &regs, bool small) {
    std::vector<llvm::Value *> elements;
    for (int reg : regs)
      elements.push_back(operand.get(reg, small));
    return packWords(lowering, kind, elements);
  };
  Registers result = lowering.registersOf(op.operand(2));
  for (const MmaStep &step : schedule.steps) {
    std::vector<llvm::Value *> accumulator;
    for (int reg : step.c)
      accumulator.push_back(result[reg]);
    if (split) {
      emitMma(lowering, call, words(a, step.a, true), words(b, step.b, false), accumulator);
      emitMma(lowering, call, words(a, step.a, false), words(b, step.b, true), accumulator);
    }
    emitMma(lowering, call, words(a, step.a, false), words(b, step.b, false), accumulator);
    for (size_t e = 0; e < step.c.size(); ++e)
      result[step.c[e]] = accumulator[e];
  }
  for (size_t reg = 0; reg < result.size(); ++reg) // broadcast duplicates
    result[reg] = result[schedule.resultSources[reg]];
  lowering.setRegisters(op.result(), std::move(result));
}

/// FMA: the operands' thread parts must follow the accumulator's (DotOperand of a Blocked
/// parent guarantees it), so each thread finds its rows and columns in its own registers.
void lowerFmaDot(KernelLowering &lowering, const ir::Operation &op) {
  const LinearLayout &aLayout = lowering.layoutOf(op.operand(0)->type(), op);
  const LinearLayout &bLayout = lowering.layoutOf(op.operand(1)->type(), op);
  const LinearLayout &cLayout = lowering.layoutOf(op.result()->type(), op);
  for (const char *dim : {kLaneDim, kWarpDim})
    for (int bit = 0; (1 << bit) < cLayout.getInDimSize(dim); ++bit) {
      Coords c = cLayout.getBasis(dim, bit), a = aLayout.getBasis(dim, bit),
             b = bLayout.getBasis(dim, bit);
      if (a[0] != c[0] || a[1] != 0 || b[1] != c[1] || b[0] != 0)
        ir::emitError(op, "codegen: FMA dot operands must be #dot_op layouts of the result's");
    }
  llvm::IRBuilder<> &builder = lowering.builder();
  std::map<Coords, int> aMap = registersByCoords(aLayout), bMap = registersByCoords(bLayout);
  const Registers &a = lowering.registersOf(op.operand(0));
  const Registers &b = lowering.registersOf(op.operand(1));
  Registers result = lowering.registersOf(op.operand(2));
  llvm::Type *accType = result.empty() ? builder.getFloatTy() : result[0]->getType();
  bool integer = accType->isIntegerTy(); // i8 operands, i32 sums (wrapping, as Triton's)
  auto widen = [&](llvm::Value *value) {
    if (value->getType() == accType)
      return value;
    return integer ? builder.CreateSExt(value, accType) : builder.CreateFPExt(value, accType);
  };
  int64_t numK = op.operand(0)->type().shape()[1];
  for (int reg = 0; reg < static_cast<int>(result.size()); ++reg) {
    Coords c = coordsOf(cLayout, reg);
    llvm::Value *sum = result[reg];
    for (int32_t k = 0; k < numK; ++k) {
      llvm::Value *x = widen(a[lookup(aMap, {c[0], k}, op)]);
      llvm::Value *y = widen(b[lookup(bMap, {k, c[1]}, op)]);
      sum = integer ? builder.CreateAdd(builder.CreateMul(x, y), sum)
                    : builder.CreateIntrinsic(llvm::Intrinsic::fma, {accType}, {x, y, sum});
    }
    result[reg] = sum;
  }
  lowering.setRegisters(op.result(), std::move(result));
}

} // namespace

void lowerDot(KernelLowering &lowering, const ir::Operation &op) {
  const EncodingPtr &encoding = op.result()->type().encoding();
  if (const auto *mma = dynamic_cast<const MmaEncoding *>(encoding.get()))
    return mma->isWgmma() ? lowerWgmmaDot(lowering, op, *mma) : lowerMmaDot(lowering, op, *mma);
  if (!dynamic_cast<const DotOperandEncoding *>(op.operand(0)->type().encoding().get()))
    ir::emitError(op, "codegen: dot operands need #dot_op layouts (run accelerate_matmul)");
  lowerFmaDot(lowering, op);
}

void lowerTrans(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &sourceType = op.operand(0)->type(), &resultType = op.result()->type();
  const LinearLayout &source = lowering.layoutOf(sourceType, op);
  const LinearLayout &result = lowering.layoutOf(resultType, op);
  std::vector<int64_t> order = op.arrayAttr("order");
  // The result's layout with each coordinate sent back to the operand's dims.
  LinearLayout::Bases bases;
  for (const auto &[inDim, vectors] : result.getBases()) {
    std::vector<LinearLayout::BasisVector> mapped;
    for (const LinearLayout::BasisVector &vector : vectors) {
      LinearLayout::BasisVector back(order.size());
      for (size_t i = 0; i < order.size(); ++i)
        back[order[i]] = vector[result.getOutDimIndex(tensorDimName(static_cast<int>(i)))];
      mapped.push_back(std::move(back));
    }
    bases.emplace_back(inDim, std::move(mapped));
  }
  LinearLayout::DimSizes outDims;
  for (size_t d = 0; d < sourceType.shape().size(); ++d)
    outDims.emplace_back(tensorDimName(static_cast<int>(d)),
                         static_cast<int32_t>(sourceType.shape()[d]));
  LinearLayout mapped(std::move(bases), std::move(outDims), /*requireSurjective=*/false);
  if (mapped != source)
    ir::emitError(op, "codegen: trans must relabel its operand's layout (run accelerate_matmul), "
                      "got " +
                          sourceType.str() + " -> " + resultType.str());
  lowering.setRegisters(op.result(), lowering.registersOf(op.operand(0)));
}

} // namespace tessera::codegen
