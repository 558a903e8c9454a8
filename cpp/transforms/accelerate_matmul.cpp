// accelerate_matmul: gives every dot the layouts of the instructions that will compute it.
// Runs after coalesce, before remove_layout_conversions (which dissolves the conversions it
// leaves). On sm_90a (the module's `wgmma` attribute) a dot of f16/bf16 into f32 whose
// shape fits becomes wgmma: an #mma version 3 result, operands staged in shared memory
// (pipeline.cpp, materialize_wgmma_operands.cpp). Otherwise a dot of f16/bf16 (or f32 with
// input_precision tf32 / tf32x3) becomes mma.sync (m16n8k16, m16n8k8 for tf32): its result
// takes an #mma layout and its operands #dot_op layouts of it (i8: m16n8k32, int32 sums); an
// "ieee" f32 or f64 dot stays on the FMA units with #dot_op layouts of its
// Blocked result. It also makes `trans` of a Blocked tile free: the result takes the operand's
// layout with its dims permuted.
//
//   %c = dot %a, %b, %acc : (tensor<64x32xf16, #B>, tensor<32x64xf16, #B>, tensor<64x64xf32, #B>)
// becomes (#M = #mma<{version = 2, warpsPerCTA = [2, 2], instrShape = [16, 8]}>)
//   %a2 = convert_layout %a : (..., #B>) -> tensor<64x32xf16, #dot_op<{opIdx = 0, parent = #M,
//   kWidth = 2}>> %b2 = convert_layout %b : (..., #B>) -> tensor<32x64xf16, #dot_op<{opIdx = 1,
//   parent = #M, kWidth = 2}>> %acc2 = convert_layout %acc : (..., #B>) -> tensor<64x64xf32, #M>
//   %c2 = dot %a2, %b2, %acc2 : (...) -> tensor<64x64xf32, #M>
//   %c = convert_layout %c2 : (tensor<64x64xf32, #M>) -> tensor<64x64xf32, #B>
//
// Plan:
// 1. trans of a Blocked tile: the result takes the permuted Blocked layout (a relabeling of
//    the same registers), looking through a conversion into its operand; its users get the
//    old layout through a conversion.
// 2. Per dot: the warps. A chained dot (its result feeds another dot's A operand, or its A
//    operand comes from a dot, as attention's two products) puts every warp along M, so
//    that a row of the product stays within one warp and the cast result can feed the next
//    dot from registers. Otherwise warps split M and N as Triton's warpsPerTileV2 does:
//    double along the dim with more instruction tiles per warp left.
// 3. Retype the dot and convert its operands in, its result back out. On wgmma, a dot of
//    widened e4m3/e5m2 tiles multiplies the 8-bit tiles themselves (narrowFp8Operands).
// 4. A narrowing cast of the result moves before that conversion (half the bytes to move);
//    remove_layout_conversions repeats this once the accumulator leaves its loop in #mma.
#include "transforms/dot_layout_rules.h"
#include "transforms/layout_passes.h"

#include "ir/diagnostics.h"
#include "ir/pass_manager.h"
#include "layout/dot_operand.h"
#include "layout/mma.h"

#include <optional>
#include <set>

namespace tessera::transforms {

using namespace ir;

namespace {

/// Blocked layout of `blocked` with its dims permuted by `order` (result dim i = operand dim
/// order[i]): the same registers, lanes and warps, relabeled.
EncodingPtr permuteBlocked(const BlockedEncoding &blocked, const std::vector<int64_t> &order) {
  std::vector<int> sizePerThread, threadsPerWarp, warpsPerCTA, inverse(order.size()), newOrder;
  for (size_t i = 0; i < order.size(); ++i) {
    sizePerThread.push_back(blocked.getSizePerThread()[order[i]]);
    threadsPerWarp.push_back(blocked.getThreadsPerWarp()[order[i]]);
    warpsPerCTA.push_back(blocked.getWarpsPerCTA()[order[i]]);
    inverse[order[i]] = static_cast<int>(i);
  }
  for (int dim : blocked.getOrder())
    newOrder.push_back(inverse[dim]);
  return std::make_shared<const BlockedEncoding>(sizePerThread, threadsPerWarp, warpsPerCTA,
                                                 newOrder);
}

/// Gives `value` the encoding `encoding`; its old users see the old type via a conversion.
void retypeResult(Value *value, const EncodingPtr &encoding) {
  Type oldType = value->type();
  if (sameEncoding(oldType.encoding(), encoding))
    return;
  std::vector<OperandUse> uses = usesOf(value);
  value->setType(oldType.withEncoding(encoding));
  if (uses.empty())
    return;
  Builder builder;
  builder.setInsertionPointAfter(value->definingOp());
  Value *back = createConvert(builder, value, oldType.encoding());
  for (const OperandUse &use : uses)
    use.user->setOperand(use.index, back);
}

// Plan step 1. A conversion feeding the trans (assign_layouts' default layout after a
// coalesced load) is skipped: the trans relabels the conversion's source instead.
void makeTransFree(Operation *op) {
  Operation *def = op->operand(0)->definingOp();
  if (def && def->code() == OpCode::ConvertLayout &&
      dynamic_cast<const BlockedEncoding *>(def->operand(0)->type().encoding().get()))
    op->setOperand(0, def->operand(0));
  const auto *blocked =
      dynamic_cast<const BlockedEncoding *>(op->operand(0)->type().encoding().get());
  if (!blocked)
    return;
  retypeResult(op->result(), permuteBlocked(*blocked, op->arrayAttr("order")));
}

/// Whether `start` reaches a dot's A operand through its users (forward) or, for a dot's
/// A operand, reaches a dot result through its definitions (backward). Bounded walks.
bool feedsDotOperandA(Value *start) {
  std::vector<Value *> worklist{start};
  std::set<Value *> seen;
  while (!worklist.empty() && seen.size() < 256) {
    Value *value = worklist.back();
    worklist.pop_back();
    if (!seen.insert(value).second)
      continue;
    for (const OperandUse &use : usesOf(value)) {
      if (use.user->code() == OpCode::Dot) {
        if (use.index == 0)
          return true;
        continue;
      }
      for (auto &result : use.user->results())
        worklist.push_back(result.get());
    }
  }
  return false;
}

bool comesFromDot(Value *start) {
  std::vector<Value *> worklist{start};
  std::set<Value *> seen;
  while (!worklist.empty() && seen.size() < 256) {
    Value *value = worklist.back();
    worklist.pop_back();
    Operation *def = value->definingOp();
    if (!seen.insert(value).second || !def)
      continue;
    if (def->code() == OpCode::Dot)
      return true;
    if (def->code() == OpCode::Load)
      continue;
    for (Value *operand : def->operands())
      if (operand->type().isTensor())
        worklist.push_back(operand);
  }
  return false;
}

// Plan step 2.
std::vector<int> chooseWarps(Operation *dot, int numWarps) {
  const std::vector<int64_t> &shape = dot->result()->type().shape();
  int64_t tilesM = shape[0] / 16, tilesN = shape[1] / 8;
  if ((feedsDotOperandA(dot->result()) || comesFromDot(dot->operand(0))) && tilesM >= numWarps)
    return {numWarps, 1};
  std::vector<int> warps{1, 1};
  while (warps[0] * warps[1] < numWarps) {
    if (tilesM / warps[0] >= tilesN / warps[1] && warps[0] < tilesM)
      warps[0] *= 2;
    else
      warps[1] *= 2;
  }
  return warps;
}

/// The module's `wgmma` attribute: 1 when the target is sm_90a (and wgmma is not turned off).
bool moduleAllowsWgmma(const Module &module) { return module.intAttrOr("wgmma", 0) != 0; }

/// The kinds wgmma multiplies natively in 8 bits (PTX ISA: .e4m3, .e5m2).
bool isWgmmaFp8(ScalarKind kind) {
  return kind == ScalarKind::F8E4M3 || kind == ScalarKind::F8E5M2;
}

/// wgmma's warps for a dot that can use it, as Triton's warpsPerTileV3: warpgroups of 4 warps
/// along M, more warps along M while the rows last, then along N; nullopt when the dot does
/// not fit: f16/bf16 operands (or any two of e4m3/e5m2) with an f32 accumulator, M a multiple
/// of 64, K of 16 (32 for fp8), N >= 16 (so both operands' shared rows are at least 32 bytes,
/// the narrowest swizzle); chained dots need M a multiple of 16 rows per warp.
std::optional<MmaEncoding> chooseWgmma(Operation *dot, int numWarps) {
  const Type &aType = dot->operand(0)->type();
  ScalarKind input = aType.scalarKind(), inputB = dot->operand(1)->type().scalarKind();
  bool fp8 = isWgmmaFp8(input) && isWgmmaFp8(inputB);
  if ((!fp8 && ((input != ScalarKind::F16 && input != ScalarKind::BF16) || inputB != input)) ||
      dot->result()->type().scalarKind() != ScalarKind::F32 || numWarps % 4 != 0)
    return std::nullopt;
  const std::vector<int64_t> &shape = dot->result()->type().shape();
  int64_t m = shape[0], n = shape[1], k = aType.shape()[1];
  if (m % 64 != 0 || k % (fp8 ? 32 : 16) != 0 || n < 16)
    return std::nullopt;
  std::vector<int> warps{4, 1};
  if (feedsDotOperandA(dot->result()) || comesFromDot(dot->operand(0))) {
    // Chained (attention): every warp along M, as for mma.sync, so that a row of the product
    // stays in one warp and P feeds the next wgmma from registers.
    if (m % (16 * int64_t(numWarps)) != 0)
      return std::nullopt;
    warps = {numWarps, 1};
  }
  while (warps[0] * warps[1] < numWarps) {
    if (m > 16 * int64_t(warps[0]))
      warps[0] *= 2;
    else if (n > 8 * int64_t(warps[1]))
      warps[1] *= 2;
    else
      return std::nullopt; // more warps than the tile has rows and columns for
  }
  int64_t instrN = std::min<int64_t>(256, n / warps[1]);
  if (instrN < 8)
    return std::nullopt;
  return MmaEncoding(3, warps, {16, static_cast<int>(instrN)});
}

/// f16/bf16, i8 (m16n8k32, int32 sums) and f32 as tf32 / tf32x3: mma.sync. "ieee" f32 and
/// f64: FMA.
bool usesTensorCores(const Operation &dot) {
  ScalarKind input = dot.operand(0)->type().scalarKind();
  if (input == ScalarKind::F16 || input == ScalarKind::BF16 || input == ScalarKind::I8)
    return true;
  if (input != ScalarKind::F32)
    return false;
  return !dot.hasAttr("input_precision") || dot.stringAttr("input_precision") != "ieee";
}

/// The e4m3/e5m2 tile that `value` (an f16 dot operand) widens, looking through layout
/// conversions; null when it is not such a widening.
Value *widenedFp8(Value *value) {
  Operation *def = value->definingOp();
  while (def && def->code() == OpCode::ConvertLayout)
    def = def->operand(0)->definingOp();
  if (!def || def->code() != OpCode::ExtF || !isWgmmaFp8(def->operand(0)->type().scalarKind()))
    return nullptr;
  return def->operand(0);
}

// Plan step 3 (fp8 on wgmma). The front end gives fp8 dots as f16 dots of the exactly widened
// operands (tir is target-neutral; mma.sync and the interpreter take them so). On wgmma an
// f16 dot into f32 whose operands both widen e4m3/e5m2 tiles multiplies those tiles instead
// (wgmma's .e4m3/.e5m2 kinds, K 32 per instruction): the same products, half the shared
// bytes. Chained dots (an A in registers) keep the f16 path: wgmma reads 8-bit A from
// registers in another fragment than the accumulator's.
void narrowFp8Operands(Operation *dot, int numWarps) {
  Value *a = widenedFp8(dot->operand(0)), *b = widenedFp8(dot->operand(1));
  if (!a || !b || dot->result()->type().scalarKind() != ScalarKind::F32 ||
      feedsDotOperandA(dot->result()) || comesFromDot(dot->operand(0)))
    return;
  Value *f16[2] = {dot->operand(0), dot->operand(1)};
  dot->setOperand(0, a);
  dot->setOperand(1, b);
  if (!chooseWgmma(dot, numWarps)) { // shapes wgmma's k32 does not tile
    dot->setOperand(0, f16[0]);
    dot->setOperand(1, f16[1]);
  }
}

void accelerateDot(Operation *dot, int numWarps, bool wgmma) {
  EncodingPtr resultEncoding = dot->result()->type().encoding();
  if (!resultEncoding)
    emitError(*dot, "accelerate_matmul needs layouts: run assign_layouts first");
  int kWidth = 1;
  if (wgmma)
    narrowFp8Operands(dot, numWarps);
  std::optional<MmaEncoding> v3 = wgmma ? chooseWgmma(dot, numWarps) : std::nullopt;
  if (v3) {
    resultEncoding = std::make_shared<const MmaEncoding>(*v3);
    kWidth = dotOperandKWidth(dot->operand(0)->type().bitWidth());
  } else if (usesTensorCores(*dot)) {
    resultEncoding = std::make_shared<const MmaEncoding>(2, chooseWarps(dot, numWarps));
    kWidth = dotOperandKWidth(dot->operand(0)->type().bitWidth());
  } else if (!dynamic_cast<const BlockedEncoding *>(resultEncoding.get())) {
    resultEncoding = defaultEncoding(dot->result()->type().shape(), numWarps);
  }
  Builder builder;
  builder.setInsertionPoint(dot);
  for (unsigned i = 0; i < 2; ++i) {
    auto operand =
        std::make_shared<const DotOperandEncoding>(static_cast<int>(i), resultEncoding, kWidth);
    if (!sameEncoding(dot->operand(i)->type().encoding(), operand))
      dot->setOperand(i, createConvert(builder, dot->operand(i), operand));
  }
  if (!sameEncoding(dot->operand(2)->type().encoding(), resultEncoding))
    dot->setOperand(2, createConvert(builder, dot->operand(2), resultEncoding));
  retypeResult(dot->result(), resultEncoding);
}

// truncf(convert_layout(x : #mma)) -> convert_layout(truncf(x)): the conversion out of the
// accumulator's layout (through shared memory) then moves half the bytes.
bool castBeforeConverting(Operation *truncf) {
  Operation *convert = truncf->operand(0)->definingOp();
  if (!convert || convert->code() != OpCode::ConvertLayout ||
      !dynamic_cast<const MmaEncoding *>(convert->operand(0)->type().encoding().get()))
    return false;
  Value *accumulator = convert->operand(0);
  Builder builder;
  builder.setInsertionPoint(truncf);
  Operation *cast =
      builder.create(OpCode::TruncF, {accumulator},
                     {accumulator->type().withElement(truncf->result()->type().elementType())});
  cast->setLocation(truncf->location());
  cast->attributes() = truncf->attributes(); // the rounding mode
  Value *converted = createConvert(builder, cast->result(), truncf->result()->type().encoding());
  truncf->result()->replaceAllUsesWith(converted);
  truncf->erase();
  return true;
}

} // namespace

bool moveCastsBeforeAccumulatorConversions(Operation *func) {
  std::vector<Operation *> casts;
  func->walk([&](Operation *op) {
    if (op->code() == OpCode::TruncF && op->result()->type().isTensor())
      casts.push_back(op);
  });
  bool changed = false;
  for (Operation *op : casts)
    changed = castBeforeConverting(op) || changed;
  return changed;
}

void accelerateMatmul(Module &module) {
  int numWarps = moduleNumWarps(module);
  bool wgmma = moduleAllowsWgmma(module);
  for (Operation *func : module.functions()) {
    std::vector<Operation *> transes, dots;
    func->walk([&](Operation *op) {
      if (op->code() == OpCode::Trans)
        transes.push_back(op);
      else if (op->code() == OpCode::Dot)
        dots.push_back(op);
    });
    for (Operation *op : transes)
      makeTransFree(op);
    for (Operation *op : dots)
      accelerateDot(op, numWarps, wgmma);
    moveCastsBeforeAccumulatorConversions(func);
  }
}

TESSERA_REGISTER_PASS(accelerate_matmul, "accelerate_matmul",
                      "Give dots mma.sync layouts (#mma result, #dot_op operands; FMA for "
                      "\"ieee\" f32) and make trans of a Blocked tile a relabeling",
                      accelerateMatmul);

} // namespace tessera::transforms
