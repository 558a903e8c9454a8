// Lowering of a dot on wgmma (sm_90a): an #mma version 3 result whose B operand (and usually
// A) sits in shared memory (local_loads into wgmma #dot_op layouts, KernelLowering::
// SharedOperand); a chained dot's A comes from registers (the m16n8k16 A fragment per warp).
//
// Each warpgroup (4 warps, 64 rows) issues, per k step of 16 and per accumulator tile of its
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} {d...}, descA, descB, 1, 1, 1,
//   tA, tB
// (fp8: m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}, k steps of 32, both operands K-major: PTX has no
// transpose for 8-bit kinds, so materialize_wgmma_operands and the pipeliner store them so)
// with 64-bit matrix descriptors (PTX ISA "Matrix Descriptor Format": start address >> 4,
// leading and stride byte offsets >> 4, swizzle mode) built from the operands' tiles; then
// commits the group. wgmma.mma_async has no LLVM intrinsic, so it is inline PTX. The wait
// (emitWgmmaWait, inline PTX too) ties the accumulator registers, so that LLVM cannot move a
// use of the results above it (docs/architecture.md), and uses the register A words, so none is
// rewritten while the wgmma may read it; it comes where the IR's `wgmma_wait` ops say (the
// wgmma_waits pass: right after the dot, or before the first op that reads the result or a
// barrier): membar's barrier before a write to bytes the dot reads then waits for it.
#include "codegen/lower_matrix.h"

#include "analysis/shared_access.h"

#include "ir/diagnostics.h"
#include "layout/mma.h"
#include "layout/swizzled_shared.h"
#include "transforms/constant_folding.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <map>

namespace tessera::codegen {

namespace {

/// One operand's tile as wgmma's descriptors see it.
struct OperandTile {
  llvm::Value *address = nullptr; // i32 shared address of the tile
  SharedTileLayout tile;          // in the operand's dims: A [M, K], B [K, N]
  int elementBytes = 0;
  bool mnMajor = false; // contiguous along M (A) or N (B): imm-trans = 1
  uint64_t fields = 0;  // leading/stride byte offsets and swizzle mode
};

OperandTile describeOperand(KernelLowering &lowering, const ir::Operation &op, unsigned index) {
  const KernelLowering::SharedOperand *view = lowering.sharedOperandOf(op.operand(index));
  if (!view)
    ir::emitError(op, "codegen: wgmma reads dot operand " + std::to_string(index) +
                          " from shared memory, but it is not a local_load of a shared tile "
                          "(run materialize_wgmma_operands)");
  OperandTile out;
  out.tile = view->tile;
  out.elementBytes = view->elementBytes;
  int kDim = index == 0 ? 1 : 0;
  out.mnMajor = out.tile.order[0] != kDim;
  int swizzle = wgmmaSwizzleBytes(out.tile, out.elementBytes);
  if (swizzle == 0)
    ir::emitError(op, "codegen: the shared tile " + out.tile.str() + " of dot operand " +
                          std::to_string(index) + " is not a wgmma 32/64/128-byte swizzle");
  // Stride byte offset: from one group of 8 rows (of the contiguous dim) to the next; leading
  // byte offset: from one column block to the next along M/N (MN-major with rows cut into
  // 128-byte blocks), else unused (one swizzle atom covers the instruction's extent).
  uint64_t sbo = 8 * uint64_t(swizzle);
  uint64_t lbo = 16;
  if (out.mnMajor && out.tile.blockCols > 0)
    lbo = uint64_t(out.tile.shape[out.tile.order[1]]) * swizzle;
  uint64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
  out.fields = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | mode << 62;
  out.address = lowering.builder().CreatePtrToInt(view->base, lowering.builder().getInt32Ty());
  return out;
}

/// Element offset, in the tile, of the warpgroup's part of the operand: the XOR of the
/// offsets of the set bits of `index` (the tile's placement is linear over GF(2), and the
/// warpgroup's coordinates share no bits with the static ones they are combined with).
llvm::Value *warpgroupOffset(KernelLowering &lowering, const OperandTile &operand,
                             llvm::Value *index, int count, int dim, int64_t step) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *offset = lowering.i32(0);
  for (int bit = 0; (1 << bit) < count; ++bit) {
    std::vector<int64_t> coords{0, 0};
    coords[dim] = step << bit;
    llvm::Value *set = b.CreateAnd(b.CreateLShr(index, lowering.i32(bit)), lowering.i32(1));
    offset = b.CreateXor(offset, b.CreateMul(set, lowering.i32(operand.tile.offsetOf(coords))));
  }
  return offset;
}

/// The descriptor of the warpgroup's part of the operand (the tile's start plus
/// `runtimeOffset` elements): computed once per dot; each instruction's descriptor adds a
/// constant to it (subDescriptor).
llvm::Value *baseDescriptor(KernelLowering &lowering, const OperandTile &operand,
                            llvm::Value *runtimeOffset) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *address =
      b.CreateAdd(operand.address, b.CreateMul(runtimeOffset, lowering.i32(operand.elementBytes)));
  llvm::Value *start = b.CreateAnd(b.CreateLShr(address, lowering.i32(4)), lowering.i32(0x3FFF));
  return b.CreateOr(b.CreateZExt(start, b.getInt64Ty()), b.getInt64(operand.fields));
}

/// The descriptor of the operand's sub-tile starting at `coords` (rows multiple of 8: the
/// swizzle phase is 0 there, so the descriptor's base offset is 0): `base` plus the sub-tile's
/// offset in 16-byte units, added to the start address field. Exact: the static offset is a
/// whole number of 16-byte units, it shares no bits with the warpgroup's (warpgroupOffset:
/// XOR = +), and every shared address is below 2^18, so the 14-bit field never carries into
/// the next. As Triton, which advances one descriptor by constants.
llvm::Value *subDescriptor(KernelLowering &lowering, const ir::Operation &op,
                           const OperandTile &operand, const std::vector<int64_t> &coords,
                           llvm::Value *base) {
  int64_t bytes = operand.tile.offsetOf(coords) * operand.elementBytes;
  if (bytes % 16 != 0)
    ir::emitError(op, "codegen: internal error: a wgmma sub-tile starts " + std::to_string(bytes) +
                          " bytes into its tile, not at 16-byte units");
  if (bytes == 0)
    return base;
  return lowering.builder().CreateAdd(base, lowering.builder().getInt64(uint64_t(bytes) >> 4));
}

/// The instruction's kinds and extents: `shape` "m64nNkK", `types` ".f32.<a>.<b>".
struct WgmmaKind {
  std::string aType, bType;
  int kStep = 16; // K per instruction: 32 bytes of each operand's row
};

/// d = a * b + d for one m64nNk16 (k32 for fp8) instruction of the warpgroup. A is a
/// descriptor (`descA`) or, when `aWords` is not empty, four 32-bit registers (pairs of 16-bit
/// elements). `accumulate` false: d = a * b (scale-d 0), the accumulator's input registers
/// unused.
void emitWgmma(KernelLowering &lowering, const WgmmaKind &kind, int n, bool transA, bool transB,
               llvm::Value *descA, const std::vector<llvm::Value *> &aWords, llvm::Value *descB,
               std::vector<llvm::Value *> &accumulator, bool accumulate) {
  llvm::IRBuilder<> &b = lowering.builder();
  int count = static_cast<int>(accumulator.size());
  bool registerA = !aWords.empty();
  int next = count; // operand number of the first input after the outputs
  std::string aText;
  std::vector<llvm::Type *> argTypes;
  std::vector<llvm::Value *> args;
  std::string constraints;
  for (int i = 0; i < count; ++i)
    constraints += "=f,";
  if (registerA) {
    aText = "{";
    for (size_t i = 0; i < aWords.size(); ++i) {
      aText += (i ? ", $" : "$") + std::to_string(next++);
      constraints += "r,";
      argTypes.push_back(b.getInt32Ty());
      args.push_back(aWords[i]);
    }
    aText += "}";
  } else {
    aText = "$" + std::to_string(next++);
    constraints += "l,";
    argTypes.push_back(b.getInt64Ty());
    args.push_back(descA);
  }
  int bIndex = next++, scaleIndex = next++;
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" + std::to_string(scaleIndex) +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k" +
                     std::to_string(kind.kStep) + ".f32." + kind.aType + "." + kind.bType + " {";
  for (int i = 0; i < count; ++i)
    text += (i ? ", $" : "$") + std::to_string(i);
  // Register A has no transpose immediate (PTX ISA: imm-trans-a only with a descriptor), and
  // 8-bit kinds have none at all (K-major only).
  std::string trans = kind.kStep == 32
                          ? std::string()
                          : (registerA ? std::string() : ", " + std::to_string(transA ? 1 : 0)) +
                                ", " + std::to_string(transB ? 1 : 0);
  text += "}, " + aText + ", $" + std::to_string(bIndex) + ", p, 1, 1" + trans + ";\n}";
  constraints += "l,r";
  for (int i = 0; i < count; ++i)
    constraints += "," + std::to_string(i);
  constraints += ",~{memory}";
  std::vector<llvm::Type *> resultTypes(count, b.getFloatTy());
  argTypes.push_back(b.getInt64Ty());
  argTypes.push_back(b.getInt32Ty());
  args.push_back(descB);
  args.push_back(lowering.i32(accumulate ? 1 : 0));
  for (llvm::Value *value : accumulator) {
    argTypes.push_back(b.getFloatTy());
    args.push_back(accumulate ? value : llvm::UndefValue::get(b.getFloatTy()));
  }
  auto *type =
      llvm::FunctionType::get(llvm::StructType::get(b.getContext(), resultTypes), argTypes, false);
  llvm::Value *result =
      b.CreateCall(llvm::InlineAsm::get(type, text, constraints, /*hasSideEffects=*/true), args);
  for (int i = 0; i < count; ++i)
    accumulator[i] = b.CreateExtractValue(result, {static_cast<unsigned>(i)});
}

} // namespace

/// Whether `accumulator` holds a wgmma's result: a wgmma dot's, or a loop-carried value the
/// loop's body yields from one (a chained accumulator, written by the tensor cores alone).
static bool accumulatedByWgmma(const ir::Value *accumulator) {
  const ir::Operation *def = accumulator->definingOp();
  if (def)
    return def->code() == ir::OpCode::Dot && analysis::isWgmmaDot(*def);
  const ir::Block *body = accumulator->ownerBlock();
  const ir::Operation *loop = body ? body->parentOp() : nullptr;
  if (!loop || loop->code() != ir::OpCode::For || accumulator->index() == 0)
    return false;
  const ir::Value *yielded = body->terminator()->operand(accumulator->index() - 1);
  const ir::Operation *source = yielded->definingOp();
  return source && source->code() == ir::OpCode::Dot && analysis::isWgmmaDot(*source);
}

void emitWgmmaWait(KernelLowering &lowering, Registers &registers, int pending,
                   const std::vector<llvm::Value *> &inputs) {
  llvm::IRBuilder<> &b = lowering.builder();
  std::string text = "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";";
  constexpr size_t kChunk = 64; // accumulator registers per statement
  // One statement per chunk (at least one), each the wait: the later ones are already
  // satisfied. The first also uses the register A words: live until the wait, they cannot be
  // rewritten (by a loop's phi copy into the same register, say) while the wgmma may still
  // read them (PTX ISA: wgmma.mma_async).
  for (size_t first = 0; first == 0 || first < registers.size(); first += kChunk) {
    size_t count = std::min(kChunk, registers.size() - first);
    std::string constraints;
    std::vector<llvm::Type *> types(count, b.getFloatTy());
    std::vector<llvm::Type *> argTypes = types;
    std::vector<llvm::Value *> args(registers.begin() + first, registers.begin() + first + count);
    for (size_t i = 0; i < count; ++i)
      constraints += "=f,";
    for (size_t i = 0; i < count; ++i)
      constraints += std::to_string(i) + ",";
    if (first == 0)
      for (llvm::Value *word : inputs) {
        constraints += "r,";
        argTypes.push_back(b.getInt32Ty());
        args.push_back(word);
      }
    constraints += "~{memory}";
    llvm::Type *resultType =
        count == 0 ? b.getVoidTy()
                   : static_cast<llvm::Type *>(llvm::StructType::get(b.getContext(), types));
    auto *type = llvm::FunctionType::get(resultType, argTypes, false);
    llvm::Value *result = b.CreateCall(llvm::InlineAsm::get(type, text, constraints, true), args);
    for (size_t i = 0; i < count; ++i)
      registers[first + i] = b.CreateExtractValue(result, {static_cast<unsigned>(i)});
  }
}

namespace {

/// Instructions per k step of 16 along M and along N: the warpgroups' tile [16 warps[0],
/// N warps[1]] repeats over the dot's result.
std::pair<int64_t, int64_t> repetitions(const ir::Operation &op, const MmaEncoding &mma) {
  const std::vector<int> &warps = mma.getWarpsPerCTA();
  const std::vector<int64_t> &shape = op.result()->type().shape();
  return {shape[0] / (16 * int64_t(warps[0])),
          shape[1] / (int64_t(mma.getInstrShape()[1]) * warps[1])};
}

bool readsRegisterA(const ir::Operation &op) {
  const ir::Operation *source = op.operand(0)->definingOp();
  return !source || source->code() != ir::OpCode::LocalLoad;
}

} // namespace

size_t wgmmaRegisterInputCount(const ir::Operation &dot, const MmaEncoding &mma) {
  if (!readsRegisterA(dot))
    return 0;
  auto [alongM, alongN] = repetitions(dot, mma);
  return static_cast<size_t>(alongM * alongN * (dot.operand(0)->type().shape()[1] / 16) * 4);
}

namespace {

/// The PTX kind of a wgmma operand's elements, "" when wgmma does not take it.
std::string wgmmaTypeName(ir::ScalarKind kind) {
  switch (kind) {
  case ir::ScalarKind::F16: return "f16";
  case ir::ScalarKind::BF16: return "bf16";
  case ir::ScalarKind::F8E4M3: return "e4m3";
  case ir::ScalarKind::F8E5M2: return "e5m2";
  default: return "";
  }
}

/// The instruction kind of the dot: f16/bf16 (one type), or any two 8-bit kinds.
WgmmaKind wgmmaKindOf(const ir::Operation &op) {
  const ir::Type &aType = op.operand(0)->type(), &bType = op.operand(1)->type();
  WgmmaKind kind{wgmmaTypeName(aType.scalarKind()), wgmmaTypeName(bType.scalarKind()),
                 aType.bitWidth() == 8 ? 32 : 16};
  bool fp8 = aType.bitWidth() == 8 && bType.bitWidth() == 8;
  if (op.result()->type().scalarKind() != ir::ScalarKind::F32 || kind.aType.empty() ||
      kind.bType.empty() || (!fp8 && kind.aType != kind.bType))
    ir::emitError(op, "codegen: wgmma dots take f16/bf16 (or e4m3/e5m2) operands into f32 "
                      "(accelerate_matmul)");
  return kind;
}

/// K elements of fp8 products summed in wgmma's own accumulator before they are added into
/// the f32 result (Triton's max_num_imprecise_acc): 0 when no such promotion is asked for
/// (the attribute absent or above K: Hopper's default, 2^30).
int64_t impreciseAccumulation(const ir::Operation &op, const WgmmaKind &kind, int64_t k) {
  if (kind.kStep != 32 || !op.hasAttr("max_num_imprecise_acc"))
    return 0;
  int64_t count = op.intAttr("max_num_imprecise_acc");
  return count <= k ? std::max<int64_t>(count, 1) : 0;
}

} // namespace

void lowerWgmmaDot(KernelLowering &lowering, const ir::Operation &op, const MmaEncoding &mma) {
  const ir::Type &aType = op.operand(0)->type(), &cType = op.result()->type();
  WgmmaKind kind = wgmmaKindOf(op);
  const std::string &inputType = kind.aType; // f16/bf16 register A words
  // A from shared memory (a descriptor) or, for chained dots, from registers.
  bool registerA = lowering.sharedOperandOf(op.operand(0)) == nullptr;
  if (registerA != readsRegisterA(op)) // wgmmaRegisterInputCount decides from the IR
    ir::emitError(op, "codegen: internal error: a wgmma A operand that is neither a local_load "
                      "of a shared tile nor in registers");
  if (registerA && kind.kStep == 32)
    ir::emitError(op, "codegen: internal error: an 8-bit wgmma A operand in registers "
                      "(materialize_wgmma_operands stages it)");
  OperandTile a = registerA ? OperandTile{} : describeOperand(lowering, op, 0);
  OperandTile b = describeOperand(lowering, op, 1);
  if (kind.kStep == 32 && (a.mnMajor || b.mnMajor))
    ir::emitError(op, "codegen: internal error: an 8-bit wgmma operand in shared memory that is "
                      "not K-major (wgmma has no transpose for 8-bit kinds)");

  const std::vector<int> &warps = mma.getWarpsPerCTA();
  int n = mma.getInstrShape()[1];
  int64_t m = cType.shape()[0], nTotal = cType.shape()[1], k = aType.shape()[1];
  int64_t rowsPerRep = 16 * int64_t(warps[0]), colsPerRep = int64_t(n) * warps[1];
  if (m % rowsPerRep != 0 || nTotal % colsPerRep != 0 || k % kind.kStep != 0)
    ir::emitError(op, "codegen: the dot's shape does not tile into " + mma.str());

  // The warpgroup's place: warp bits step M first (16, 32 within the warpgroup, then 64, ...),
  // then N (wgmma's N).
  llvm::IRBuilder<> &builder = lowering.builder();
  llvm::Value *warp = lowering.warpId();
  int groupsAlongM = warps[0] / 4;
  llvm::Value *groupM =
      builder.CreateAnd(builder.CreateLShr(warp, lowering.i32(2)), lowering.i32(groupsAlongM - 1));
  llvm::Value *groupN =
      builder.CreateLShr(warp, lowering.i32(__builtin_ctz(static_cast<unsigned>(warps[0]))));
  llvm::Value *baseA =
      registerA
          ? nullptr
          : baseDescriptor(lowering, a, warpgroupOffset(lowering, a, groupM, groupsAlongM, 0, 64));
  llvm::Value *baseB =
      baseDescriptor(lowering, b, warpgroupOffset(lowering, b, groupN, warps[1], 1, n));

  // Accumulator register of each (row, column) at lane 0, warp 0.
  std::map<Coords, int> registerAt = registersByCoords(lowering.layoutOf(cType, op));
  // A's registers: the m16n8k16 A fragment per warp (a0..a3 = rows +0/+8, k +0/+8, pairs of
  // consecutive k), found by their coordinates at lane 0, warp 0.
  std::map<Coords, int> aRegisterAt =
      registerA ? registersByCoords(lowering.layoutOf(aType, op)) : std::map<Coords, int>{};
  const Registers *aRegisters = registerA ? &lowering.registersOf(op.operand(0)) : nullptr;
  auto aWordsAt = [&](int64_t row0, int64_t k0) {
    std::vector<llvm::Value *> words;
    llvm::Type *half = inputType == "f16" ? builder.getHalfTy() : builder.getBFloatTy();
    auto *pair = llvm::FixedVectorType::get(half, 2);
    for (int word = 0; word < 4; ++word) {
      int64_t row = row0 + 8 * (word & 1), k = k0 + 8 * (word >> 1);
      llvm::Value *packed = llvm::PoisonValue::get(pair);
      for (int e = 0; e < 2; ++e) {
        auto it = aRegisterAt.find({static_cast<int32_t>(row), static_cast<int32_t>(k + e)});
        if (it == aRegisterAt.end())
          ir::emitError(op, "codegen: internal error: no A register holds (" + std::to_string(row) +
                                ", " + std::to_string(k + e) + ")");
        packed = builder.CreateInsertElement(packed, (*aRegisters)[it->second], uint64_t(e));
      }
      words.push_back(builder.CreateBitCast(packed, builder.getInt32Ty()));
    }
    return words;
  };
  Registers result = lowering.registersOf(op.operand(2));
  // A zero accumulator is not read: the first k step computes d = a * b (scale-d 0), so no
  // register is zeroed, and none is written while an earlier wgmma may still be in flight
  // (ptxas would serialize the products around such a write, C7514).
  bool zeroAccumulator = ir::isZeroConstant(op.operand(2));
  // An accumulator set up by other instructions (attention's -lse broadcast, a bias) writes
  // registers this dot's wgmma wrote at the loop's previous iteration. Where ptxas sees no
  // wgmma.wait_group between the two, it injects a wait for every group in flight (C7517):
  // the groups the loop carries across its back edge (dK, dV) then finish before this dot
  // starts. A wait that keeps every pending group in flight (no stall: codegen knows them
  // all) shows ptxas the order; the earlier wgmma's own wait retired it.
  if (!zeroAccumulator && !accumulatedByWgmma(op.operand(2)))
    lowering.emitWgmmaOrderMark();
  std::vector<llvm::Value *> aInputs; // every A word, for the wait to keep live
  auto registersOfTile = [&](int64_t row0, int64_t col0) {
    std::vector<int> regs; // PTX ISA wgmma D fragment: d[i] at row 8 * (i / 2 % 2), column
                           // 8 * (i / 4) + i % 2 (lane and warp parts aside)
    for (int i = 0; i < n / 2; ++i) {
      Coords coords{static_cast<int32_t>(row0 + 8 * ((i >> 1) & 1)),
                    static_cast<int32_t>(col0 + 8 * (i >> 2) + (i & 1))};
      auto it = registerAt.find(coords);
      if (it == registerAt.end())
        ir::emitError(op, "codegen: internal error: no accumulator register holds (" +
                              std::to_string(coords[0]) + ", " + std::to_string(coords[1]) + ")");
      regs.push_back(it->second);
    }
    return regs;
  };

  // Register A words are packed before the fence: written after it, ptxas would have to
  // insert a warpgroup.arrive before each wgmma reading them (C7519).
  std::map<std::pair<int64_t, int64_t>, std::vector<llvm::Value *>> aWordsOf;
  if (registerA)
    for (int64_t kk = 0; kk < k; kk += 16)
      for (int64_t row0 = 0; row0 < m; row0 += rowsPerRep)
        aWordsOf[{row0, kk}] = aWordsAt(row0, kk);
  // With max_num_imprecise_acc (fp8), each run of `stepsPerPartial` k steps sums into fresh
  // registers (scale-d 0 at its first step), which are waited for and added into the f32
  // result in f32 (as Triton's partial accumulator): wgmma's fp8 accumulation keeps fewer
  // bits than f32.
  int64_t imprecise = impreciseAccumulation(op, kind, k);
  int64_t stepsPerPartial = imprecise ? (imprecise + kind.kStep - 1) / kind.kStep : 0;
  Registers partial(result.size(), llvm::UndefValue::get(builder.getFloatTy()));
  lowering.callIntrinsic(llvm::Intrinsic::nvvm_wgmma_fence_sync_aligned, {}, {});
  for (int64_t kk = 0, step = 0; kk < k; kk += kind.kStep, ++step) {
    bool partialStart = imprecise && step % stepsPerPartial == 0;
    Registers &target = imprecise ? partial : result;
    for (int64_t row0 = 0; row0 < m; row0 += rowsPerRep)
      for (int64_t col0 = 0; col0 < nTotal; col0 += colsPerRep) {
        std::vector<int> regs = registersOfTile(row0, col0);
        std::vector<llvm::Value *> accumulator;
        for (int reg : regs)
          accumulator.push_back(target[reg]);
        llvm::Value *descA =
            registerA ? nullptr : subDescriptor(lowering, op, a, {row0, kk}, baseA);
        std::vector<llvm::Value *> aWords =
            registerA ? aWordsOf[{row0, kk}] : std::vector<llvm::Value *>{};
        llvm::Value *descB = subDescriptor(lowering, op, b, {kk, col0}, baseB);
        aInputs.insert(aInputs.end(), aWords.begin(), aWords.end());
        bool accumulate = imprecise ? !partialStart : !(zeroAccumulator && kk == 0);
        emitWgmma(lowering, kind, n, a.mnMajor, b.mnMajor, descA, aWords, descB, accumulator,
                  accumulate);
        for (size_t i = 0; i < regs.size(); ++i)
          target[regs[i]] = accumulator[i];
      }
    bool last = kk + kind.kStep >= k;
    if (imprecise && ((step + 1) % stepsPerPartial == 0 || last)) {
      lowering.callIntrinsic(llvm::Intrinsic::nvvm_wgmma_commit_group_sync_aligned, {}, {});
      emitWgmmaWait(lowering, partial, 0, {});
      for (size_t i = 0; i < result.size(); ++i)
        result[i] = builder.CreateFAdd(result[i], partial[i]);
      if (!last)
        lowering.callIntrinsic(llvm::Intrinsic::nvvm_wgmma_fence_sync_aligned, {}, {});
    }
  }
  if (imprecise) { // every product already waited for and added
    lowering.setRegisters(op.result(), std::move(result));
    return;
  }
  lowering.callIntrinsic(llvm::Intrinsic::nvvm_wgmma_commit_group_sync_aligned, {}, {});
  lowering.setRegisters(op.result(), std::move(result));
  lowering.deferWgmmaWait(op.result(), std::move(aInputs)); // until a wgmma_wait retires it
}

} // namespace tessera::codegen
