// TMA and mbarrier ops -> inline PTX (sm_90a; the TESSERA_TMA path). One thread (the lane of
// warp 0 elect.sync chose at the kernel's entry: KernelLowering::issuer) initializes the
// mbarriers, arrives with the expected byte count and issues the copies; every thread waits
// on the barrier's phase parity. A tma_load of a tile whose rows
// exceed the swizzle span (128 bytes) issues one box per 128-byte column block, each to its
// block of the slot (SharedTileLayout::blockCols), so the bytes land exactly where the
// pipeliner's wgmma layout (layout/swizzled_shared.h) puts them; the host encodes the same box
// and swizzle (python/tessera/runtime/tensor_map.py). A map of rank 3 to 5 (a [1, .., BLOCK, D]
// block whose 2-D tile the slot holds) copies with cp.async.bulk.tensor.3d..5d.
//
// A TMA store (lowerTmaStore) is the mirror of a load: every thread writes its registers
// into the op's scratch in the box layout and swizzle of the map (as a load's bytes land),
// fence.proxy.async.shared::cta (its generic-proxy writes become visible to the async proxy),
// bar.sync, then the issuing thread copies each 128-byte column block with
// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group, commits the group and waits until
// the scratch has been read (wait_group.read 0): membar then orders any later write of those
// bytes with a barrier as after any op's scratch, and no CTA exits with its reads pending.
// With `bulk_deferred` (membar's, analysis/membar.h plan step 8) it only commits: the copy
// reads the scratch while the code after it runs, and the barrier membar placed before the
// next write of those bytes (or before the return) carries `bulk_wait`: the issuer waits
// there (emitBulkReadWait), then the bar.sync orders every thread's write after it.
// The TMA clips the box at the tensor's bounds: the masked store's meaning, without the mask.
//
// A TMA reduction (lowerTmaReduce: a descriptor's atomic_rmw with `tma`) is the same sequence
// with cp.reduce.async.bulk.tensor.2d.global.shared::cta.<op>.tile.bulk_group: the TMA unit
// combines the box into global memory (each element's update relaxed, gpu scope, as the
// pointer atomic it replaces; the element type is the map's), clipped at the tensor's bounds.
#include "codegen/lower_tma.h"

#include "analysis/shared_footprint.h"
#include "codegen/lower_debug.h"
#include "codegen/lower_matrix.h"
#include "ir/diagnostics.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

namespace {

void emitAsm(KernelLowering &lowering, const std::string &text, const std::string &constraints,
             const std::vector<llvm::Value *> &args) {
  llvm::IRBuilder<> &b = lowering.builder();
  std::vector<llvm::Type *> types;
  for (llvm::Value *arg : args)
    types.push_back(arg->getType());
  auto *type = llvm::FunctionType::get(b.getVoidTy(), types, false);
  b.CreateCall(llvm::InlineAsm::get(type, text, constraints, /*hasSideEffects=*/true), args);
}

/// A shared pointer as the 32-bit address PTX's .shared::cta operands take.
llvm::Value *address32(KernelLowering &lowering, llvm::Value *pointer) {
  return lowering.builder().CreatePtrToInt(pointer, lowering.builder().getInt32Ty());
}

/// The 32-bit address of barriers[slot] (8 bytes each).
llvm::Value *barrierAddress(KernelLowering &lowering, const ir::Operation &op, unsigned index,
                            llvm::Value *slot) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *base = address32(lowering, lowering.registersOf(op.operand(index))[0]);
  return b.CreateAdd(base, b.CreateMul(slot, lowering.i32(8)));
}

/// i32 1 in the issuing thread (one elected thread of warp 0, or of the first producer warp
/// inside a warp_specialize region: KernelLowering::issuer) where `predicate` (may be null)
/// holds, else 0.
llvm::Value *leader(KernelLowering &lowering, llvm::Value *predicate) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *first = lowering.issuer();
  if (predicate)
    first = b.CreateAnd(first, predicate);
  return b.CreateZExt(first, b.getInt32Ty());
}

/// Whether some thread reads `ring` through the generic proxy: a local_load into registers
/// (ldmatrix, ld.shared). A wgmma reads its shared operand through the async proxy itself,
/// as the TMA writes it (lower_shared_buffers.cpp: such a local_load loads nothing).
bool readThroughGenericProxy(const ir::Value *ring) {
  for (const ir::Operation *user : ring->users())
    if (user->code() == ir::OpCode::LocalLoad &&
        !isWgmmaOperand(user->result()->type().encoding().get()))
      return true;
  return false;
}

const char *const kIfLeader = "{ .reg .pred p; setp.ne.b32 p, $0, 0; ";

int64_t slotCount(const ir::Operation &op, unsigned index) {
  return op.operand(index)->type().shape()[0];
}

void lowerInit(KernelLowering &lowering, const ir::Operation &op) {
  llvm::Value *first = leader(lowering, nullptr);
  for (int64_t slot = 0; slot < slotCount(op, 0); ++slot)
    emitAsm(lowering, std::string(kIfLeader) + "@p mbarrier.init.shared::cta.b64 [$1], $2; }",
            "r,r,r",
            {first, barrierAddress(lowering, op, 0, lowering.i32(slot)),
             lowering.i32(op.intAttr("count"))});
  // The initialization is visible to the async proxy (the TMA unit) and to every thread.
  emitAsm(lowering, "fence.mbarrier_init.release.cluster;", "", {});
  lowering.emitBarrier();
}

void lowerExpectTx(KernelLowering &lowering, const ir::Operation &op) {
  llvm::Value *slot = lowering.registersOf(op.operand(1))[0];
  emitAsm(lowering,
          std::string(kIfLeader) + "@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], $2; }",
          "r,r,r",
          {leader(lowering, lowering.registersOf(op.operand(2))[0]),
           barrierAddress(lowering, op, 0, slot), lowering.i32(op.intAttr("bytes"))});
}

void lowerTmaLoad(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &ring = op.operand(1)->type();
  int elementBytes = lowering.memoryBytes(ring, op);
  SharedTileLayout tile = analysis::sharedSlotTile(ring, true);
  int swizzle = wgmmaSwizzleBytes(tile, elementBytes);
  if (tile.order.size() != 2 || tile.order[0] != 1 || swizzle == 0)
    ir::emitError(op, "codegen: tma_load needs a slot in a wgmma swizzle (32, 64 or 128 bytes) "
                      "with the last dim contiguous, got " +
                          tile.str());
  int64_t rows = tile.shape[0], boxColumns = swizzle / elementBytes;
  int64_t boxes = std::max<int64_t>(1, tile.shape[1] / boxColumns);
  llvm::Value *slot = lowering.registersOf(op.operand(2))[0];
  llvm::Value *slotBytes = lowering.i32(tile.allocationSize() * elementBytes);
  llvm::Value *ringBase = address32(lowering, lowering.registersOf(op.operand(1))[0]);
  llvm::Value *destination = b.CreateAdd(ringBase, b.CreateMul(slot, slotBytes));
  llvm::Value *barrier = barrierAddress(lowering, op, 3, slot);
  llvm::Value *first = leader(lowering, lowering.registersOf(op.operand(4))[0]);
  llvm::Value *map = lowering.registersOf(op.operand(0))[0];
  // Coordinates, outermost first: the map's leading dims (box 1: the slot holds the 2-D tile
  // of the last two), then the slot's row and column.
  unsigned rank = op.numOperands() - 5;
  std::vector<llvm::Value *> coords;
  for (unsigned c = 5; c < op.numOperands(); ++c)
    coords.push_back(lowering.registersOf(op.operand(c))[0]);
  llvm::Value *column = coords.back();
  // The slot was last read before the barrier (or the empty mbarrier) that precedes this
  // copy. Through the generic proxy (ldmatrix, when the dot is not on wgmma), those reads are
  // ordered before the async proxy's writes by a proxy fence. Read by wgmma only, they are
  // async-proxy reads already: no fence (as Triton's and CUTLASS's TMA mainloops; the fence
  // is a MEMBAR.ALL.CTA in SASS, in front of each of the issuing thread's copies).
  if (readThroughGenericProxy(op.operand(1)))
    emitAsm(lowering, std::string(kIfLeader) + "@p fence.proxy.async.shared::cta; }", "r", {first});
  // $0 the issuer, $1 the slot, $2 the map, $3.. the coordinates innermost first, then the
  // mbarrier.
  std::string operands, constraints = "r,r,l";
  for (unsigned i = 0; i < rank; ++i) {
    operands += (i ? ", $" : "$") + std::to_string(3 + i);
    constraints += ",r";
  }
  std::string text = std::string(kIfLeader) + "@p cp.async.bulk.tensor." + std::to_string(rank) +
                     "d.shared::cluster.global.mbarrier::complete_tx::bytes [$1], [$2, {" +
                     operands + "}], [$" + std::to_string(3 + rank) + "]; }";
  for (int64_t box = 0; box < boxes; ++box) {
    std::vector<llvm::Value *> args{first,
                                    b.CreateAdd(destination, lowering.i32(box * rows * swizzle)),
                                    map, b.CreateAdd(column, lowering.i32(box * boxColumns))};
    for (unsigned i = 1; i < rank; ++i)
      args.push_back(coords[rank - 1 - i]);
    args.push_back(barrier);
    emitAsm(lowering, text, constraints + ",r", args);
  }
}

/// A wait bounded by `timeout_ns` (debug builds, transforms/pipeline/tma.h): spins on
/// try_wait while %globaltimer says less than the timeout has passed; past it, every waiting
/// thread fails an assert naming the wait (the launch reports cudaErrorAssert, not a hang).
/// Threads where `waits` is 0 skip it.
void lowerBoundedWait(KernelLowering &lowering, const ir::Operation &op, llvm::Value *barrier,
                      llvm::Value *phase, llvm::Value *waits) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto *type = llvm::FunctionType::get(
      b.getInt32Ty(), {b.getInt32Ty(), b.getInt32Ty(), b.getInt64Ty(), b.getInt32Ty()}, false);
  const char *text = "{ .reg .pred done, waiting; .reg .u64 start, now; "
                     "setp.eq.u32 done, $4, 0; "
                     "@done bra TESSERA_MBAR_DONE_${:uid}; "
                     "mov.u64 start, %globaltimer; "
                     "TESSERA_MBAR_WAIT_${:uid}: "
                     "mbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2; "
                     "@done bra TESSERA_MBAR_DONE_${:uid}; "
                     "mov.u64 now, %globaltimer; sub.u64 now, now, start; "
                     "setp.lt.u64 waiting, now, $3; "
                     "@waiting bra TESSERA_MBAR_WAIT_${:uid}; "
                     "TESSERA_MBAR_DONE_${:uid}: selp.u32 $0, 0, 1, done; }";
  llvm::Value *timedOut = b.CreateCall(
      llvm::InlineAsm::get(type, text, "=r,r,r,l,r", /*hasSideEffects=*/true),
      {barrier, phase, b.getInt64(static_cast<uint64_t>(op.intAttr("timeout_ns"))), waits});
  emitAssertFailure(lowering, b.CreateICmpNE(timedOut, lowering.i32(0)),
                    "mbarrier wait timed out after " +
                        std::to_string(op.intAttr("timeout_ns") / 1000000) +
                        " ms: a pipelined TMA copy never completed or a ring slot was never "
                        "released (expected bytes, phase or coordinates wrong)",
                    op.location());
}

/// Every thread waits, or with a predicate operand only the issuing thread, where it holds
/// (the wait for a slot's release before its copies).
void lowerWait(KernelLowering &lowering, const ir::Operation &op) {
  llvm::Value *slot = lowering.registersOf(op.operand(1))[0];
  llvm::Value *barrier = barrierAddress(lowering, op, 0, slot);
  llvm::Value *phase = lowering.registersOf(op.operand(2))[0];
  // The issuer's wait for a slot's release: the issuing thread alone, or (the module's
  // tma_convergent_waits) every thread, the predicate being uniform. ptxas serializes every
  // wgmma of a kernel where it must place a wgmma dependency barrier inside a divergent path
  // (C7518), which the issuer-only wait can be; a thread past its own release of the slot
  // waits for the others' (each warp released it earlier in the same program order).
  llvm::Value *waits = nullptr;
  if (op.numOperands() == 4) {
    llvm::Value *predicate = lowering.registersOf(op.operand(3))[0];
    waits = lowering.convergentWaits()
                ? lowering.builder().CreateZExt(predicate, lowering.builder().getInt32Ty())
                : leader(lowering, predicate);
  }
  if (op.hasAttr("timeout_ns"))
    return lowerBoundedWait(lowering, op, barrier, phase, waits ? waits : lowering.i32(1));
  if (waits)
    return emitAsm(lowering,
                   "{ .reg .pred p, done; setp.ne.b32 p, $0, 0; "
                   "@!p bra TESSERA_MBAR_SKIP_${:uid}; TESSERA_MBAR_WAIT_${:uid}: "
                   "mbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2; "
                   "@!done bra TESSERA_MBAR_WAIT_${:uid}; TESSERA_MBAR_SKIP_${:uid}: }",
                   "r,r,r", {waits, barrier, phase});
  emitAsm(lowering,
          "{ .reg .pred done; TESSERA_MBAR_WAIT_${:uid}: "
          "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1; "
          "@!done bra TESSERA_MBAR_WAIT_${:uid}; }",
          "r,r", {barrier, phase});
}

/// Each warp releases a slot: its wgmma groups but the newest `wgmma_pending` retired (the
/// older ones read the slot), its lanes' reads done (bar.warp.sync), lane 0 arrives once
/// (release semantics: the issuing thread's wait acquires every warp's reads).
void lowerArrive(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  lowering.callIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {}, {lowering.i32(-1)});
  llvm::Value *slot = lowering.registersOf(op.operand(1))[0];
  llvm::Value *arrives = b.CreateAnd(b.CreateICmpEQ(lowering.laneId(), lowering.i32(0)),
                                     lowering.registersOf(op.operand(2))[0]);
  emitAsm(lowering, std::string(kIfLeader) + "@p mbarrier.arrive.shared::cta.b64 _, [$1]; }", "r,r",
          {b.CreateZExt(arrives, b.getInt32Ty()), barrierAddress(lowering, op, 0, slot)});
}

void lowerInval(KernelLowering &lowering, const ir::Operation &op) {
  lowering.emitBarrier(); // every thread is past its last wait
  llvm::Value *first = leader(lowering, nullptr);
  for (int64_t slot = 0; slot < slotCount(op, 0); ++slot)
    emitAsm(lowering, std::string(kIfLeader) + "@p mbarrier.inval.shared::cta.b64 [$1]; }", "r,r",
            {first, barrierAddress(lowering, op, 0, lowering.i32(slot))});
}

/// The TMA store's sequence (see the top of the file) with `instruction` (the bulk copy or
/// reduction of one box, operands $1 the map, $2 the column, $3 the row, $4 the box's shared
/// address) issued per 128-byte column block. False (nothing emitted) where it does not apply.
bool lowerTileToGlobal(KernelLowering &lowering, const ir::Operation &op,
                       const std::string &instruction) {
  std::optional<SharedTileLayout> tile = analysis::tmaStoreTile(op);
  if (!tile || lowering.smVersion() < 90 || !op.hasAttr("scratch_offset"))
    return false;
  llvm::IRBuilder<> &b = lowering.builder();
  const ir::Type &valueType = op.operand(1)->type();
  int elementBytes = lowering.memoryBytes(valueType, op);
  llvm::Value *scratch = lowering.sharedScratch(op, tile->allocationSize() * elementBytes);
  storeToSharedTile(lowering, op, lowering.registersOf(op.operand(1)),
                    lowering.layoutOf(valueType, op), *tile, scratch, valueType.elementType());
  emitAsm(lowering, "fence.proxy.async.shared::cta;", "", {});
  lowering.emitBarrier();
  int swizzle = wgmmaSwizzleBytes(*tile, elementBytes);
  int64_t rows = tile->shape[0], boxColumns = swizzle / elementBytes;
  int64_t boxes = std::max<int64_t>(1, tile->shape[1] / boxColumns);
  llvm::Value *first = leader(lowering, nullptr);
  llvm::Value *source = address32(lowering, scratch);
  llvm::Value *map = lowering.registersOf(op.operand(3))[0];
  llvm::Value *row = lowering.registersOf(op.operand(4))[0];
  llvm::Value *column = lowering.registersOf(op.operand(5))[0];
  // $0 the issuer, $1 the map, $2 the column, $3 the row (innermost first), $4 the box.
  for (int64_t box = 0; box < boxes; ++box)
    emitAsm(lowering, std::string(kIfLeader) + "@p " + instruction + " }", "r,l,r,r,r",
            {first, map, b.CreateAdd(column, lowering.i32(box * boxColumns)), row,
             b.CreateAdd(source, lowering.i32(box * rows * swizzle))});
  emitAsm(lowering,
          std::string(kIfLeader) +
              (op.hasAttr("bulk_deferred")
                   ? "@p cp.async.bulk.commit_group; }"
                   : "@p cp.async.bulk.commit_group; @p cp.async.bulk.wait_group.read 0; }"),
          "r", {first});
  return true;
}

} // namespace

void emitBulkReadWait(KernelLowering &lowering) {
  if (lowering.smVersion() < 90) // no TMA store or reduction was lowered as one
    return;
  emitAsm(lowering, std::string(kIfLeader) + "@p cp.async.bulk.wait_group.read 0; }", "r",
          {leader(lowering, nullptr)});
}

bool lowerTmaStore(KernelLowering &lowering, const ir::Operation &op) {
  return op.code() == ir::OpCode::Store &&
         lowerTileToGlobal(lowering, op,
                           "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$1, {$2, $3}], "
                           "[$4];");
}

bool lowerTmaReduce(KernelLowering &lowering, const ir::Operation &op) {
  std::string reduction = analysis::tmaReduction(op);
  return !reduction.empty() &&
         lowerTileToGlobal(lowering, op,
                           "cp.reduce.async.bulk.tensor.2d.global.shared::cta." + reduction +
                               ".tile.bulk_group [$1, {$2, $3}], [$4];");
}

bool lowerTmaOp(KernelLowering &lowering, const ir::Operation &op) {
  if (lowering.smVersion() < 90 &&
      (op.code() == ir::OpCode::TmaLoad || op.code() == ir::OpCode::MBarrierInit))
    ir::emitError(op, std::string("codegen: ") + op.name() + " needs sm_90a");
  switch (op.code()) {
  case ir::OpCode::MBarrierInit: lowerInit(lowering, op); return true;
  case ir::OpCode::MBarrierExpectTx: lowerExpectTx(lowering, op); return true;
  case ir::OpCode::TmaLoad: lowerTmaLoad(lowering, op); return true;
  case ir::OpCode::MBarrierWait: lowerWait(lowering, op); return true;
  case ir::OpCode::MBarrierInval: lowerInval(lowering, op); return true;
  case ir::OpCode::MBarrierArrive: lowerArrive(lowering, op); return true;
  default: return false;
  }
}

void addTensorMapParameters(const ir::Operation &func, llvm::Function &function) {
  if (!func.hasAttr("tensormaps"))
    return;
  llvm::LLVMContext &context = function.getContext();
  auto *bytes = llvm::ArrayType::get(llvm::Type::getInt8Ty(context), 128);
  for (int64_t index : func.arrayAttr("tensormaps")) {
    // `.param .align 64 .b8 name[128]`, read in place (__grid_constant__): TMA instructions
    // take the parameter's generic address (cvta.param).
    function.addParamAttr(static_cast<unsigned>(index),
                          llvm::Attribute::getWithByValType(context, bytes));
    function.addParamAttr(static_cast<unsigned>(index),
                          llvm::Attribute::getWithAlignment(context, llvm::Align(64)));
    function.addParamAttr(static_cast<unsigned>(index),
                          llvm::Attribute::get(context, "nvvm.grid_constant"));
  }
}

} // namespace tessera::codegen
