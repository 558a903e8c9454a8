// Lowering of shared-memory staging for tensor cores: conversions into #mma dot-operand layouts,
// and the pipeliner's ops (local_alloc, local_load, async_copy, async_commit_group,
// async_wait, barrier). Also the dispatcher of all of issue 5's ops (lowerTensorCoreOp).
//
// A conversion into a dot operand that registers cannot do (a coalesced load's tile to the
// mma fragments) goes: barrier; each thread stores its elements, 16 bytes at a time, into a
// tile swizzled for the operand (dotOperandSharedEncoding); barrier; ldmatrix reads the
// fragments (layout/ldmatrix.h; plain ld.shared where no ldmatrix form fits, e.g. tf32 B
// stored N-major). The pipeliner's ring buffers sit at the offsets it gave them (attribute
// `offset`) in a reserved region; while they are live (local_alloc .. the async_wait 0 after
// the loop, in their block) the scratch region of conversions follows them, elsewhere it
// reuses their bytes.
#include "codegen/lower_tensor_core.h"

#include "ir/diagnostics.h"
#include "ir/tensor_core_verifier.h"
#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/ldmatrix.h"
#include "layout/shared_encoding.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

namespace {

/// The dim a shared tile should keep contiguous for `layout`'s stores: the one its
/// consecutive registers step (vector stores), else the one its first lanes step (a warp's
/// stores then fill whole rows), else the last.
int fastestDim(const LinearLayout &layout) {
  for (const char *dim : {kRegisterDim, kLaneDim}) {
    int numBits = layout.hasInDim(dim) ? layout.getInDimSizeLog2(dim) : 0;
    for (int bit = 0; bit < numBits; ++bit)
      for (int axis = 0; axis < layout.getNumOutDims(); ++axis)
        if (layout.getBasis(dim, bit, tensorDimName(axis)) == 1)
          return axis;
  }
  return layout.getNumOutDims() - 1;
}

llvm::Value *byteAddress(KernelLowering &lowering, llvm::Value *base, llvm::Value *elementOffset,
                         int elementBytes) {
  llvm::IRBuilder<> &b = lowering.builder();
  return b.CreateGEP(b.getInt8Ty(), base, b.CreateMul(elementOffset, lowering.i32(elementBytes)));
}

llvm::Intrinsic::ID ldmatrixIntrinsic(int numMatrices, bool transposed) {
  switch (numMatrices) {
  case 1:
    return transposed ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_trans_b16
                      : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_b16;
  case 2:
    return transposed ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16
                      : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16;
  default:
    return transposed ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                      : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16;
  }
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
      ldmatrixIntrinsic(plan.numMatrices, plan.transposed), {address->getType()}, {address});
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

/// The conversion of `op` goes through the operand tile: into an #mma dot operand, and more
/// than a register permutation.
bool needsOperandTile(KernelLowering &lowering, const ir::Operation &op) {
  const auto *operand =
      dynamic_cast<const DotOperandEncoding *>(op.result()->type().encoding().get());
  if (!operand || !operand->getMmaParent() || op.operand(0)->type().rank() != 2)
    return false;
  const LinearLayout &source = lowering.layoutOf(op.operand(0)->type(), op);
  const LinearLayout &destination = lowering.layoutOf(op.result()->type(), op);
  return planConversion(source, destination).kind > ConversionKind::RegisterPermutation;
}

void lowerOperandConversion(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &type = op.result()->type();
  const LinearLayout &source = lowering.layoutOf(op.operand(0)->type(), op);
  const LinearLayout &destination = lowering.layoutOf(type, op);
  int elementBytes = lowering.memoryBytes(type, op);
  int fastest = fastestDim(source);
  SharedTileLayout tile = dotOperandSharedEncoding(type.shape(), {fastest, 1 - fastest},
                                                   elementBytes)
                              ->tileFor(type.shape());
  llvm::Value *base = lowering.sharedScratch(tile.allocationSize() * elementBytes);
  lowering.emitBarrier(); // earlier readers of the scratch region are done
  storeToSharedTile(lowering, op, lowering.registersOf(op.operand(0)), source, tile, base,
                    type.elementType());
  lowering.emitBarrier();
  lowering.setRegisters(op.result(),
                        loadFromSharedTile(lowering, op, destination, tile, base, type.elementType()));
}

/// The 2-D tile of one slot of a #shared buffer (the buffer itself when it has no ring dim),
/// and the bytes a slot takes.
SharedTileLayout slotTile(const ir::Type &bufferType, bool hasRingDim) {
  const auto &encoding = static_cast<const SharedEncoding &>(*bufferType.encoding());
  std::vector<int64_t> shape = bufferType.shape();
  if (!hasRingDim)
    return encoding.tileFor(shape);
  shape.erase(shape.begin());
  std::vector<int> order;
  for (int dim : encoding.getOrder())
    if (dim != 0)
      order.push_back(dim - 1);
  return SharedEncoding(encoding.getVec(), encoding.getPerPhase(), encoding.getMaxPhase(), order)
      .tileFor(shape);
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
  int elementBytes = lowering.memoryBytes(type, op);
  bool isRing = op.numOperands() == 0 && type.rank() == 3; // slots need not be a power of two
  SharedTileLayout tile = slotTile(type, isRing);
  int64_t bytes = (isRing ? type.shape()[0] : 1) * tile.allocationSize() * elementBytes;
  llvm::Value *base;
  if (op.hasAttr("offset")) {
    // The buffers may overlap the scratch of earlier conversions: wait for their readers.
    if (!lowering.sharedBuffersLive())
      lowering.emitBarrier();
    lowering.setSharedBuffersLive(true);
    base = lowering.sharedBuffer(op.intAttr("offset"), bytes);
  } else if (op.numOperands() == 1) {
    base = lowering.sharedScratch(bytes);
  } else {
    ir::emitError(op, "codegen: local_alloc without a source needs an offset (allocate it)");
  }
  if (op.numOperands() == 1) {
    const ir::Type &sourceType = op.operand(0)->type();
    lowering.emitBarrier();
    storeToSharedTile(lowering, op, lowering.registersOf(op.operand(0)),
                      lowering.layoutOf(sourceType, op), tile, base, sourceType.elementType());
    lowering.emitBarrier();
  }
  lowering.setRegisters(op.result(), {base});
}

void lowerLocalLoad(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &bufferType = op.operand(0)->type(), &type = op.result()->type();
  int elementBytes = lowering.memoryBytes(type, op);
  SharedTileLayout tile = slotTile(bufferType, op.numOperands() == 2);
  llvm::Value *base = slotBase(lowering, op, 0, tile, elementBytes);
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
/// `predicate` (may be null) is false.
void emitAsyncCopy(KernelLowering &lowering, llvm::Value *destination, llvm::Value *source,
                   int bytes, llvm::Value *predicate) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *sourceBytes =
      predicate ? b.CreateSelect(predicate, lowering.i32(bytes), lowering.i32(0)) : lowering.i32(bytes);
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
  SharedTileLayout tile = slotTile(bufferType, true);
  llvm::Value *base = slotBase(lowering, op, 1, tile, elementBytes);
  const LinearLayout &layout = lowering.layoutOf(pointerType, op);
  LinearLayout offsets = sharedOffsetLayout(layout, tile);
  int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
  int width = sharedAccessWidth(offsets, elementBytes, duplicates);
  int dim = fastestDim(layout);
  ir::Value *pointers = op.operand(0);
  ir::Value *mask = op.numOperands() == 4 ? op.operand(3) : nullptr;
  width = static_cast<int>(std::min<int64_t>(width, lowering.axisInfo().pointerAlignment(pointers, dim)));
  if (mask)
    width = static_cast<int>(std::min<int64_t>(width, lowering.axisInfo().maskAlignment(mask, dim)));
  const Registers &sources = lowering.registersOf(pointers);
  const Registers *masks = mask ? &lowering.registersOf(mask) : nullptr;
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  for (int first = 0; first < static_cast<int>(sources.size()); first += width) {
    if (first & duplicates)
      continue;
    llvm::Value *destination = byteAddress(lowering, base, indices[first][0], elementBytes);
    llvm::Value *predicate = masks ? (*masks)[first] : nullptr;
    if (width * elementBytes >= 4)
      emitAsyncCopy(lowering, destination, sources[first], width * elementBytes, predicate);
    else // the pipeliner asks for >= 4 bytes, but the clones' axis info may know less
      emitSynchronousCopy(lowering, destination, sources[first], width * elementBytes, predicate);
  }
}

/// Whether `wait` ends the pipeliner's buffers: it waits for every group and is the wait after
/// the loop, in the block of the rings' local_alloc. The wait at the top of the loop body is
/// {pending = 0} too at num_stages = 2, yet the rings are still read and written there: were
/// the scratch to reuse their bytes, a conversion in the loop would overwrite them.
bool endsSharedBuffers(const ir::Operation &wait) {
  if (wait.intAttr("pending") != 0)
    return false;
  for (const auto &op : wait.parentBlock()->operations()) {
    if (op.get() == &wait)
      return false;
    if (op->code() == ir::OpCode::LocalAlloc && op->hasAttr("offset"))
      return true;
  }
  return false;
}

} // namespace

void storeToSharedTile(KernelLowering &lowering, const ir::Operation &op, const Registers &source,
                       const LinearLayout &layout, const SharedTileLayout &tile,
                       llvm::Value *base, const ir::Type &elementType) {
  llvm::Type *memoryType = lowering.memoryType(elementType, op);
  int elementBytes = lowering.memoryBytes(elementType, op);
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

bool lowerTensorCoreOp(KernelLowering &lowering, const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Dot:
    lowerDot(lowering, op);
    return true;
  case ir::OpCode::Trans:
    lowerTrans(lowering, op);
    return true;
  case ir::OpCode::ConvertLayout:
    if (!needsOperandTile(lowering, op))
      return false;
    lowerOperandConversion(lowering, op);
    return true;
  case ir::OpCode::LocalAlloc:
    lowerLocalAlloc(lowering, op);
    return true;
  case ir::OpCode::LocalLoad:
    lowerLocalLoad(lowering, op);
    return true;
  case ir::OpCode::AsyncCopy:
    lowerAsyncCopy(lowering, op);
    return true;
  case ir::OpCode::AsyncCommitGroup:
    lowering.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    return true;
  case ir::OpCode::AsyncWait:
    lowering.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {},
                           {lowering.i32(op.intAttr("pending"))});
    if (endsSharedBuffers(op)) // the pipeliner's last wait: its buffers are dead
      lowering.setSharedBuffersLive(false);
    return true;
  case ir::OpCode::Barrier:
    lowering.emitBarrier();
    return true;
  default:
    return false;
  }
}

} // namespace tessera::codegen
