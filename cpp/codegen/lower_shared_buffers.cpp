// Lowering of shared-memory staging for tensor cores: conversions into #mma dot-operand layouts,
// and the pipeliner's ops (local_alloc, local_load, async_copy, async_commit_group,
// async_wait, barrier). Also the dispatcher of every tensor-core and shared-memory op
// (lowerTensorCoreOp).
//
// A conversion into a dot operand that registers cannot do (a coalesced load's tile to the
// mma fragments) goes: each thread stores its elements, 16 bytes at a time, into a tile
// swizzled for the operand (dotOperandSharedEncoding) at the op's scratch_offset; barrier;
// ldmatrix reads the fragments (layout/ldmatrix.h; plain ld.shared where no ldmatrix form
// fits, e.g. tf32 B stored N-major). Buffers sit at the offsets allocate_shared gave them;
// every barrier between ops is a `barrier` op that membar placed (analysis/membar.h).
#include "codegen/lower_matrix.h"
#include "codegen/lower_tma.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"
#include "ir/verify_matrix.h"
#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/ldmatrix.h"
#include "layout/swizzled_shared.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <map>

namespace tessera::codegen {

namespace {

llvm::Value *byteAddress(KernelLowering &lowering, llvm::Value *base, llvm::Value *elementOffset,
                         int elementBytes) {
  llvm::IRBuilder<> &b = lowering.builder();
  return b.CreateGEP(b.getInt8Ty(), base, b.CreateMul(elementOffset, lowering.i32(elementBytes)));
}

/// The ldmatrix (store = false) or stmatrix (store = true) intrinsic of .x1, .x2 or .x4
/// (`numMatrices`), plain or .trans: one table for both directions.
llvm::Intrinsic::ID matrixIntrinsic(bool store, int numMatrices, bool transposed) {
  using namespace llvm::Intrinsic;
  static constexpr ID kTable[2][3][2] = {
      {{nvvm_ldmatrix_sync_aligned_m8n8_x1_b16, nvvm_ldmatrix_sync_aligned_m8n8_x1_trans_b16},
       {nvvm_ldmatrix_sync_aligned_m8n8_x2_b16, nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16},
       {nvvm_ldmatrix_sync_aligned_m8n8_x4_b16, nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16}},
      {{nvvm_stmatrix_sync_aligned_m8n8_x1_b16, nvvm_stmatrix_sync_aligned_m8n8_x1_trans_b16},
       {nvvm_stmatrix_sync_aligned_m8n8_x2_b16, nvvm_stmatrix_sync_aligned_m8n8_x2_trans_b16},
       {nvvm_stmatrix_sync_aligned_m8n8_x4_b16, nvvm_stmatrix_sync_aligned_m8n8_x4_trans_b16}}};
  int count = numMatrices == 1 ? 0 : numMatrices == 2 ? 1 : 2; // anything else: .x4
  return kTable[store][count][transposed];
}

/// fence.proxy.async.shared::cta in a func with wgmma dots: this thread's st.shared writes so
/// far become visible to the async proxy that wgmma reads through, once the barrier membar
/// placed before the dot orders them across threads. Only register -> shared copies get it
/// (local_alloc of a source), as in Triton 3.6 (FenceInsertion: local_alloc with a source and
/// local_store only) and CUTLASS's cp.async + GMMA mainloops: a ring filled by cp.async is
/// read by wgmma after cp.async.wait_group and the barrier alone. The fence is MEMBAR.ALL.CTA
/// + FENCE.VIEW.ASYNC.S in SASS; after the ring's wait it cost every step of every pipelined
/// wgmma loop both (docs/perf/matmul_sass.md).
void emitProxyFence(KernelLowering &lowering) {
  if (lowering.usesWgmma())
    lowering.callIntrinsic(llvm::Intrinsic::nvvm_fence_proxy_async_shared_cta, {}, {});
}

/// Emits ldmatrix instruction `instruction` of `plan` and stores its registers in `result`.
void emitLdmatrix(KernelLowering &lowering, const LdmatrixPlan &plan, int instruction,
                  llvm::Value *rowOffset, llvm::Value *base, llvm::Type *elementType,
                  int elementBytes, Registers &result) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Type *wordType = plan.elementsPerWord == 1
                             ? elementType
                             : llvm::FixedVectorType::get(elementType, plan.elementsPerWord);
  llvm::Value *address = byteAddress(lowering, base, rowOffset, elementBytes);
  llvm::Value *loaded = lowering.callIntrinsic(
      matrixIntrinsic(false, plan.numMatrices, plan.transposed), {address->getType()}, {address});
  for (int word = 0; word < plan.numMatrices; ++word) {
    llvm::Value *bits = plan.numMatrices == 1
                            ? loaded
                            : b.CreateExtractValue(loaded, {static_cast<unsigned>(word)});
    llvm::Value *value = b.CreateBitCast(bits, wordType);
    for (int e = 0; e < plan.elementsPerWord; ++e)
      result[instruction * plan.registersPerInstruction + word * plan.elementsPerWord + e] =
          plan.elementsPerWord == 1 ? value : b.CreateExtractElement(value, uint64_t(e));
  }
}

Registers loadWithLdmatrix(KernelLowering &lowering, const LdmatrixPlan &plan,
                           const LinearLayout &layout, llvm::Value *base, llvm::Type *elementType,
                           int elementBytes) {
  Registers result(layout.getInDimSize(kRegisterDim));
  std::vector<std::vector<llvm::Value *>> rows = lowering.emitIndices(plan.addresses);
  for (size_t instruction = 0; instruction < rows.size(); ++instruction)
    emitLdmatrix(lowering, plan, static_cast<int>(instruction), rows[instruction][0], base,
                 elementType, elementBytes, result);
  return result;
}

/// Stores the registers of a layout with stmatrix (planStmatrix): instruction i stores
/// registers [i * registersPerInstruction, ...), each 32-bit word two 16-bit elements, low
/// half first, exactly where ldmatrix of the same plan would have delivered them from.
void storeWithStmatrix(KernelLowering &lowering, const LdmatrixPlan &plan, const Registers &source,
                       llvm::Value *base, llvm::Type *memoryType) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto *pairType = llvm::FixedVectorType::get(memoryType, 2);
  // Row offset = thread part ^ instruction part. The instruction part's bits that no lane or
  // warp bit can set are added instead (the same value): they fold into the address
  // immediate, so the instructions share a few address registers. With one register per
  // instruction, LLVM hoisted all of them out of a persistent matmul's tile loop and ptxas
  // spilled them (the descriptor matmul, 128x256 w8, ragged C).
  LinearLayout threadLayout =
      plan.addresses.sublayout({kLaneDim, kWarpDim, kBlockDim}, {kOffsetDim});
  llvm::Value *threadPart = lowering.emitIndices(threadLayout)[0][0];
  int32_t threadBits = 0;
  for (const auto &[dim, vectors] : threadLayout.getBases())
    for (const LinearLayout::BasisVector &vector : vectors)
      threadBits |= vector[0];
  int numInstructions =
      plan.addresses.hasInDim(kRegisterDim) ? plan.addresses.getInDimSize(kRegisterDim) : 1;
  std::map<int32_t, llvm::Value *> rowsByXor;
  for (int instruction = 0; instruction < numInstructions; ++instruction) {
    int32_t part = plan.addresses.hasInDim(kRegisterDim)
                       ? plan.addresses.apply({{kRegisterDim, instruction}})[0].second
                       : 0;
    llvm::Value *&row = rowsByXor[part & threadBits];
    if (!row)
      row = (part & threadBits) ? b.CreateXor(threadPart, lowering.i32(part & threadBits))
                                : threadPart;
    llvm::Value *offset = b.CreateAdd(row, lowering.i32(part & ~threadBits));
    std::vector<llvm::Value *> arguments = {byteAddress(lowering, base, offset, 2)};
    for (int word = 0; word < plan.numMatrices; ++word) {
      size_t first = instruction * plan.registersPerInstruction + word * plan.elementsPerWord;
      llvm::Value *pair = llvm::PoisonValue::get(pairType);
      for (int e = 0; e < 2; ++e)
        pair = b.CreateInsertElement(pair, lowering.toMemory(source[first + e], memoryType),
                                     uint64_t(e));
      arguments.push_back(b.CreateBitCast(pair, b.getInt32Ty()));
    }
    lowering.callIntrinsic(matrixIntrinsic(true, plan.numMatrices, plan.transposed),
                           {arguments[0]->getType()}, arguments);
  }
}

/// The registers of `layout` read by ldmatrix on demand: the first request for a register
/// emits (at the current insertion point) the instruction that fills it.
KernelLowering::RegisterMaker lazyLdmatrix(KernelLowering &lowering, const LdmatrixPlan &plan,
                                           const LinearLayout &layout, llvm::Value *base,
                                           llvm::Type *elementType, int elementBytes) {
  struct State {
    LdmatrixPlan plan;
    std::vector<std::vector<llvm::Value *>> rows;
    Registers loaded;
  };
  auto state = std::make_shared<State>();
  state->plan = plan;
  state->rows = lowering.emitIndices(plan.addresses); // address arithmetic, emitted here
  state->loaded.assign(layout.getInDimSize(kRegisterDim), nullptr);
  return [&lowering, state, base, elementType, elementBytes](int reg) {
    if (!state->loaded[reg]) {
      int instruction = reg / state->plan.registersPerInstruction;
      emitLdmatrix(lowering, state->plan, instruction, state->rows[instruction][0], base,
                   elementType, elementBytes, state->loaded);
    }
    return state->loaded[reg];
  };
}

/// A local_load whose only user is a dot of its block: the dot reads each k step's fragments
/// right before their mma instructions, so they are live briefly (as Triton's prefetch).
bool feedsOneDot(const ir::Operation &op) {
  const std::vector<ir::Operation *> &users = op.result()->users();
  return users.size() == 1 && users[0]->code() == ir::OpCode::Dot &&
         users[0]->parentBlock() == op.parentBlock();
}

/// Groups of consecutive registers one shared access may cover: consecutive offsets, at most
/// 16 bytes, never splitting a group of duplicate registers.
int sharedAccessWidth(const LinearLayout &offsets, int elementBytes, int32_t skipMask) {
  int width = std::min(offsets.getNumConsecutiveInOut(kRegisterDim, kOffsetDim),
                       std::max(1, 16 / elementBytes));
  while (skipMask & (width - 1))
    width /= 2;
  return width;
}

void lowerOperandConversion(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &type = op.result()->type();
  const LinearLayout &source = lowering.layoutOf(op.operand(0)->type(), op);
  const LinearLayout &destination = lowering.layoutOf(type, op);
  int elementBytes = lowering.memoryBytes(type, op);
  SharedTileLayout tile = analysis::operandConversionTile(op);
  llvm::Value *base = lowering.sharedScratch(op, tile.allocationSize() * elementBytes);
  storeToSharedTile(lowering, op, lowering.registersOf(op.operand(0)), source, tile, base,
                    type.elementType());
  lowering.emitBarrier(); // internal to the op: every store lands before ldmatrix reads
  lowering.setRegisters(
      op.result(), loadFromSharedTile(lowering, op, destination, tile, base, type.elementType()));
}

llvm::Value *slotBase(KernelLowering &lowering, const ir::Operation &op, unsigned bufferIndex,
                      const SharedTileLayout &tile, int elementBytes) {
  llvm::Value *base = lowering.registersOf(op.operand(bufferIndex))[0];
  if (op.numOperands() <= bufferIndex + 1)
    return base;
  llvm::Value *slot = lowering.registersOf(op.operand(bufferIndex + 1))[0];
  return byteAddress(lowering, base, slot, static_cast<int>(tile.allocationSize()) * elementBytes);
}

void lowerLocalAlloc(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &type = op.result()->type();
  SharedTileLayout tile = analysis::sharedSlotTile(type, analysis::isRingAlloc(op));
  llvm::Value *base = lowering.sharedBuffer(op, analysis::localAllocBytes(op));
  if (op.numOperands() == 1) { // membar orders these stores against earlier and later users
    const ir::Type &sourceType = op.operand(0)->type();
    storeToSharedTile(lowering, op, lowering.registersOf(op.operand(0)),
                      lowering.layoutOf(sourceType, op), tile, base, sourceType.elementType());
    emitProxyFence(lowering);
  }
  lowering.setRegisters(op.result(), {base});
}

void lowerLocalLoad(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &bufferType = op.operand(0)->type(), &type = op.result()->type();
  int elementBytes = lowering.memoryBytes(type, op);
  SharedTileLayout tile = analysis::sharedSlotTile(bufferType, op.numOperands() == 2);
  llvm::Value *base = slotBase(lowering, op, 0, tile, elementBytes);
  if (op.hasAttr("order")) { // the same bytes seen transposed: swap the dims
    std::swap(tile.shape[0], tile.shape[1]);
    for (int &dim : tile.order)
      dim = 1 - dim;
  }
  const auto *operand = dynamic_cast<const DotOperandEncoding *>(type.encoding().get());
  if (operand && operand->getMmaParent() && operand->getMmaParent()->isWgmma()) {
    // wgmma reads the tile itself through a descriptor (lower_matrix_wgmma.cpp): nothing to load.
    lowering.setSharedOperand(op.result(), {base, tile, elementBytes});
    return;
  }
  const LinearLayout &layout = lowering.layoutOf(type, op);
  llvm::Type *registerType = lowering.registerType(type, op);
  if (feedsOneDot(op) && lowering.memoryType(type, op) == registerType)
    if (std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, elementBytes)) {
      lowering.setLazyRegisters(
          op.result(), lazyLdmatrix(lowering, *plan, layout, base, registerType, elementBytes));
      return;
    }
  lowering.setRegisters(op.result(),
                        loadFromSharedTile(lowering, op, layout, tile, base, type.elementType()));
}

/// cp.async of `bytes` (4, 8 or 16) from `source` to `destination`, zero-filled where
/// `predicate` (may be null) is false; issued only where `owner` (may be null) holds: a
/// predicated instruction (inline PTX), not a branch, so the loop's blocks stay as they were.
void emitAsyncCopy(KernelLowering &lowering, llvm::Value *destination, llvm::Value *source,
                   int bytes, llvm::Value *predicate, llvm::Value *owner) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *sourceBytes = predicate
                                 ? b.CreateSelect(predicate, lowering.i32(bytes), lowering.i32(0))
                                 : lowering.i32(bytes);
  if (owner) {
    std::string text = std::string("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.") +
                       (bytes == 16 ? "cg" : "ca") + ".shared.global [$1], [$2], " +
                       std::to_string(bytes) + ", $3; }";
    std::vector<llvm::Value *> args = {b.CreateZExt(owner, b.getInt32Ty()),
                                       b.CreatePtrToInt(destination, b.getInt32Ty()), source,
                                       sourceBytes};
    std::vector<llvm::Type *> types;
    for (llvm::Value *arg : args)
      types.push_back(arg->getType());
    auto *type = llvm::FunctionType::get(b.getVoidTy(), types, false);
    b.CreateCall(llvm::InlineAsm::get(type, text, "r,r,l,r", /*hasSideEffects=*/true), args);
    return;
  }
  llvm::Intrinsic::ID id = bytes == 16  ? llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s
                           : bytes == 8 ? llvm::Intrinsic::nvvm_cp_async_ca_shared_global_8_s
                                        : llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s;
  lowering.callIntrinsic(id, {}, {destination, source, sourceBytes});
}

/// A copy narrower than cp.async allows (runs of < 4 bytes): synchronous, zero-filled where
/// `predicate` (may be null) is false. The async_wait and barrier that follow order it too.
void emitSynchronousCopy(KernelLowering &lowering, llvm::Value *destination, llvm::Value *source,
                         int bytes, llvm::Value *predicate) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Type *type = b.getIntNTy(8 * bytes);
  llvm::Align align(bytes);
  if (!predicate) {
    b.CreateAlignedStore(b.CreateAlignedLoad(type, source, align), destination, align);
    return;
  }
  llvm::BasicBlock *entry = b.GetInsertBlock();
  llvm::Function *function = entry->getParent();
  auto *load = llvm::BasicBlock::Create(b.getContext(), "copy.load", function);
  auto *merge = llvm::BasicBlock::Create(b.getContext(), "copy.end", function);
  b.CreateCondBr(predicate, load, merge);
  b.SetInsertPoint(load);
  llvm::Value *value = b.CreateAlignedLoad(type, source, align);
  b.CreateBr(merge);
  b.SetInsertPoint(merge);
  llvm::PHINode *phi = b.CreatePHI(type, 2);
  phi->addIncoming(value, load);
  phi->addIncoming(llvm::ConstantInt::get(type, 0), entry);
  b.CreateAlignedStore(phi, destination, align);
}

void lowerAsyncCopy(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &pointerType = op.operand(0)->type(), &bufferType = op.operand(1)->type();
  int elementBytes = lowering.memoryBytes(bufferType, op);
  SharedTileLayout tile = analysis::sharedSlotTile(bufferType, true);
  llvm::Value *base = slotBase(lowering, op, 1, tile, elementBytes);
  const LinearLayout &layout = lowering.layoutOf(pointerType, op);
  LinearLayout offsets = sharedOffsetLayout(layout, tile);
  int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
  int width = sharedAccessWidth(offsets, elementBytes, duplicates);
  int dim = analysis::fastestDim(layout);
  ir::Value *pointers = op.operand(0);
  ir::Value *mask = op.numOperands() == 4 ? op.operand(3) : nullptr;
  width = static_cast<int>(
      std::min<int64_t>(width, lowering.axisInfo().pointerAlignment(pointers, dim)));
  if (mask)
    width =
        static_cast<int>(std::min<int64_t>(width, lowering.axisInfo().maskAlignment(mask, dim)));
  const Registers &sources = lowering.registersOf(pointers);
  const Registers *masks = mask ? &lowering.registersOf(mask) : nullptr;
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  // Only the first owner of each element copies it (as stores do): a layout that replicates
  // elements over lanes or warps (a 1-D row such as attention's lse, 32 elements over 128
  // threads) would have every holder copy the same bytes into the same slot, a write-write
  // race (compute-sanitizer's racecheck reports it) and wasted copies. The mask cannot do
  // it: a masked-off cp.async still writes its zero fill. The readers lose nothing: async_wait
  // and the barrier after it (membar) publish every thread's copies to all of them.
  llvm::Value *owner = lowering.emitOwnerPredicate(layout);
  llvm::BasicBlock *done = nullptr;
  if (owner && width * elementBytes < 4) { // synchronous copies: a branch around them all
    llvm::IRBuilder<> &b = lowering.builder();
    llvm::Function *function = b.GetInsertBlock()->getParent();
    auto *copies = llvm::BasicBlock::Create(b.getContext(), "copy.owner", function);
    done = llvm::BasicBlock::Create(b.getContext(), "copy.done", function);
    b.CreateCondBr(owner, copies, done);
    b.SetInsertPoint(copies);
    owner = nullptr;
  }
  for (int first = 0; first < static_cast<int>(sources.size()); first += width) {
    if (first & duplicates)
      continue;
    llvm::Value *destination = byteAddress(lowering, base, indices[first][0], elementBytes);
    llvm::Value *predicate = masks ? (*masks)[first] : nullptr;
    if (width * elementBytes >= 4)
      emitAsyncCopy(lowering, destination, sources[first], width * elementBytes, predicate, owner);
    else // the pipeliner asks for >= 4 bytes, but the clones' axis info may know less
      emitSynchronousCopy(lowering, destination, sources[first], width * elementBytes, predicate);
  }
  if (done) {
    lowering.builder().CreateBr(done);
    lowering.builder().SetInsertPoint(done);
  }
}

} // namespace

void storeToSharedTile(KernelLowering &lowering, const ir::Operation &op, const Registers &source,
                       const LinearLayout &layout, const SharedTileLayout &tile, llvm::Value *base,
                       const ir::Type &elementType) {
  llvm::Type *memoryType = lowering.memoryType(elementType, op);
  int elementBytes = lowering.memoryBytes(elementType, op);
  if (lowering.smVersion() >= 90)
    if (std::optional<LdmatrixPlan> plan = planStmatrix(layout, tile, elementBytes))
      return storeWithStmatrix(lowering, *plan, source, base, memoryType);
  LinearLayout offsets = sharedOffsetLayout(layout, tile);
  int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
  int width = sharedAccessWidth(offsets, elementBytes, duplicates);
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  for (int first = 0; first < static_cast<int>(source.size()); first += width) {
    if (first & duplicates)
      continue;
    emitVectorStore(lowering, byteAddress(lowering, base, indices[first][0], elementBytes),
                    llvm::ArrayRef<llvm::Value *>(source).slice(first, width), memoryType);
  }
}

Registers loadFromSharedTile(KernelLowering &lowering, const ir::Operation &op,
                             const LinearLayout &layout, const SharedTileLayout &tile,
                             llvm::Value *base, const ir::Type &elementType) {
  llvm::Type *memoryType = lowering.memoryType(elementType, op);
  llvm::Type *registerType = lowering.registerType(elementType, op);
  int elementBytes = lowering.memoryBytes(elementType, op);
  if (memoryType == registerType)
    if (std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, elementBytes))
      return loadWithLdmatrix(lowering, *plan, layout, base, registerType, elementBytes);
  LinearLayout offsets = sharedOffsetLayout(layout, tile);
  int width = sharedAccessWidth(offsets, elementBytes, 0);
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  Registers result(indices.size());
  for (int first = 0; first < static_cast<int>(indices.size()); first += width) {
    std::vector<llvm::Value *> loaded =
        emitVectorLoad(lowering, byteAddress(lowering, base, indices[first][0], elementBytes),
                       memoryType, registerType, width);
    std::copy(loaded.begin(), loaded.end(), result.begin() + first);
  }
  return result;
}

// warpgroup_turn (transforms/warpgroup_pingpong.cpp): named barrier 2 + g is warpgroup g's
// turn, 256 threads (both warpgroups) each. "wait": bar.sync on its own; "pass": bar.arrive
// on the other's; "open": warpgroup 1 arrives on warpgroup 0's; "close": warpgroup 0 syncs
// on its own once more. Barrier 0 is membar's, 1 the warp-specialized consumers'.
void lowerWarpgroupTurn(KernelLowering &lowering, const ir::Operation &op) {
  constexpr int kFirstTurnBarrier = 2;
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *group = b.CreateLShr(lowering.warpId(), 2); // uniform in a warpgroup
  const std::string &turn = op.stringAttr("turn");
  std::string text;
  llvm::Value *arg = nullptr;
  if (turn == "wait" || turn == "pass") {
    llvm::Value *owner = turn == "wait" ? group : b.CreateXor(group, lowering.i32(1));
    arg = b.CreateAdd(owner, lowering.i32(kFirstTurnBarrier));
    text = std::string(turn == "wait" ? "bar.sync" : "bar.arrive") + " $0, 256;";
  } else {
    arg = group;
    std::string id = std::to_string(kFirstTurnBarrier);
    text = turn == "open" ? "{ .reg .pred p; setp.ne.u32 p, $0, 0; @p bar.arrive " + id + ", 256; }"
                          : "{ .reg .pred p; setp.eq.u32 p, $0, 0; @p bar.sync " + id + ", 256; }";
  }
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getInt32Ty()}, false);
  b.CreateCall(llvm::InlineAsm::get(type, text, "r,~{memory}", /*hasSideEffects=*/true), {arg});
}

bool lowerTensorCoreOp(KernelLowering &lowering, const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Dot: lowerDot(lowering, op); return true;
  case ir::OpCode::Trans: lowerTrans(lowering, op); return true;
  case ir::OpCode::ConvertLayout:
    if (!analysis::convertsThroughOperandTile(op))
      return false;
    lowerOperandConversion(lowering, op);
    return true;
  case ir::OpCode::LocalAlloc: lowerLocalAlloc(lowering, op); return true;
  case ir::OpCode::LocalLoad: lowerLocalLoad(lowering, op); return true;
  case ir::OpCode::AsyncCopy: lowerAsyncCopy(lowering, op); return true;
  case ir::OpCode::AsyncCommitGroup:
    lowering.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    return true;
  case ir::OpCode::AsyncWait:
    lowering.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {},
                           {lowering.i32(op.intAttr("pending"))});
    return true;            // and no proxy fence: see emitProxyFence
  case ir::OpCode::Barrier: // the wgmma_wait before it kept membar's `wgmma_pending` groups
    if (op.hasAttr("bulk_wait"))
      emitBulkReadWait(lowering);
    lowering.emitBarrier(/*groupsInFlight=*/true);
    return true;
  case ir::OpCode::WarpgroupTurn: lowerWarpgroupTurn(lowering, op); return true;
  default: return false;
  }
}

} // namespace tessera::codegen
