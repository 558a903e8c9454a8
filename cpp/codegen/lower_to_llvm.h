// Internal interface of the tile IR -> LLVM IR lowering, shared by the lower_*.cpp files.
//
// A tile IR value becomes, in each thread, one LLVM value per register of its linear layout
// (index = the layout's "register" input); a scalar becomes one value that every thread
// holds. KernelLowering owns that mapping plus the per-thread context (lane, warp, shared
// scratch: thread_indices.cpp); lower_to_llvm.cpp walks the function and hands each op to
// the file for its kind.
#pragma once

#include "analysis/axis_info.h"
#include "ir/ir.h"
#include "layout/linear_layout.h"
#include "layout/shared_tile_layout.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessera::codegen {

/// The per-thread LLVM values of one tile IR value.
using Registers = std::vector<llvm::Value *>;

class KernelLowering;
using LowerFn = void (*)(KernelLowering &lowering, const ir::Operation &op);
/// How one op is lowered: the entry point and its name (codegen::loweringRules() lists them).
struct LoweringRule {
  const char *name;
  LowerFn lower;
};

class KernelLowering {
public:
  KernelLowering(llvm::Module &module, int numWarps);
  KernelLowering(const KernelLowering &) = delete;

  /// Emits `func` as a ptx_kernel.
  llvm::Function *lowerFunction(const ir::Operation &func);
  /// Bytes of dynamic shared memory the kernel uses (the func's `shared_size`).
  int sharedBytes() const { return static_cast<int>(sharedBytes_); }
  /// The lowering of each op, by op code (empty for ops.def's NO_RULE ops of codegen).
  static const std::array<LoweringRule, ir::kNumOpCodes> &loweringTable();

  // ---- Used by the per-op lowering files -------------------------------------------------
  llvm::IRBuilder<> &builder() { return builder_; }
  llvm::LLVMContext &context() { return module_.getContext(); }
  int numWarps() const { return numWarps_; }
  const analysis::AxisInfoAnalysis &axisInfo() const { return *axisInfo_; }

  const Registers &registersOf(const ir::Value *value) const;
  void setRegisters(const ir::Value *value, Registers registers);
  /// Registers made on demand, at the insertion point of their first use: maker(i) returns
  /// register i (a dot operand read from shared memory just before the mma instructions that
  /// need it: lower_shared_buffers.cpp, lower_matrix.cpp). Null when `value` has none.
  using RegisterMaker = std::function<llvm::Value *(int)>;
  void setLazyRegisters(const ir::Value *value, RegisterMaker maker) {
    lazyValues_[value] = std::move(maker);
  }
  const RegisterMaker *lazyRegistersOf(const ir::Value *value) const {
    auto it = lazyValues_.find(value);
    return it == lazyValues_.end() ? nullptr : &it->second;
  }

  /// A dot operand wgmma reads from shared memory (a local_load into a wgmma #dot_op
  /// layout): no registers, only where its tile sits. `tile` is in the operand's dims.
  struct SharedOperand {
    llvm::Value *base = nullptr; // addrspace(3) pointer to the tile (its ring slot)
    SharedTileLayout tile;
    int elementBytes = 0;
  };
  void setSharedOperand(const ir::Value *value, SharedOperand operand) {
    sharedOperands_[value] = std::move(operand);
  }
  const SharedOperand *sharedOperandOf(const ir::Value *value) const {
    auto it = sharedOperands_.find(value);
    return it == sharedOperands_.end() ? nullptr : &it->second;
  }
  /// Whether the func has wgmma dots: shared memory they read that generic-proxy writes
  /// (cp.async, st.shared) filled needs fence.proxy.async after those writes.
  bool usesWgmma() const { return usesWgmma_; }

  /// fast_divf (fp32 `/` and tl.fdiv, Triton's div.full.f32: 2 ulp) as div.full.f32, which
  /// brought swiglu from 0.76 to 1.00 and dropout from 0.90 to 0.99 of Triton's speed (H100).
  /// Off, the correctly rounded div.rn, which is within the promise too: codegen.cpp turns it
  /// off for kernels with a dot, where div.full made Triton's flash attention tutorial 1.28x
  /// slower (A/B on an H100, docs/perf/triton_parity.md).
  bool fastDivision() const { return fastDivision_; }
  void setFastDivision(bool fast) { fastDivision_ = fast; }
  /// Groups kept in flight across barriers and back edges (the module's `wgmma_overlap` and
  /// `wgmma_pipeline`; docs/perf/wgmma_across_iterations.md): a wait then ties only the
  /// results some op still reads. Where the waits go is the IR's (the wgmma_waits pass).
  bool pipelineWgmma() const { return pipelineWgmma_; }
  void setPipelineWgmma(bool pipeline) { pipelineWgmma_ = pipeline; }
  /// The module's `tma_convergent_waits`: an mbarrier_wait with a predicate (the issuing
  /// thread's wait for a slot's release) is waited by every thread where the predicate
  /// holds, not by the issuer alone (lower_tma.cpp).
  bool convergentWaits() const { return convergentWaits_; }
  void setConvergentWaits(bool convergent) { convergentWaits_ = convergent; }
  /// The target's SM version (80 for sm_80, 90 for sm_90a): picks hardware fp8 conversions.
  int smVersion() const { return smVersion_; }
  void setSmVersion(int version) { smVersion_ = version; }
  /// `result`'s registers are the untied outputs of a committed, unwaited wgmma group, waited
  /// for by a later `wgmma_wait` op. `inputs`: its register A words, kept live until then.
  void deferWgmmaWait(const ir::Value *result, std::vector<llvm::Value *> inputs = {}) {
    pendingWgmma_.push_back({result, std::move(inputs)});
  }

  /// LLVM type of a scalar or pointer (of a tensor's element) as held in registers.
  llvm::Type *registerType(const ir::Type &type, const ir::Operation &op);
  /// The type an element has in memory: i1 -> i8 (bytes), pointers -> i64.
  llvm::Type *memoryType(const ir::Type &type, const ir::Operation &op);
  llvm::Value *toMemory(llvm::Value *value, llvm::Type *memoryType);
  llvm::Value *fromMemory(llvm::Value *value, llvm::Type *registerType);
  int memoryBytes(const ir::Type &type, const ir::Operation &op);

  /// Linear layout of a tensor type, from its encoding (cached). Throws a CompileError about
  /// `op` when the tensor has no encoding or the layout does not fit the CTA.
  const LinearLayout &layoutOf(const ir::Type &tensorType, const ir::Operation &op);
  /// Registers per thread of a value of this type: 1 for scalars.
  int numRegisters(const ir::Type &type, const ir::Operation &op);

  // ---- Per-thread context (thread_indices.cpp) --------------------------------------------
  /// For each register r of `layout`, the i32 value of each output dim in this thread
  /// (indices[r][outDimIndex]): L(r, lane, warp) as an XOR of basis vectors.
  std::vector<std::vector<llvm::Value *>> emitIndices(const LinearLayout &layout);
  /// One output dim of L(0, lane, warp) for this thread (the register-independent part).
  llvm::Value *emitThreadPart(const LinearLayout &layout, int outDimIndex);
  /// i1 true in the threads that are the first owner of their elements (lane and warp bits
  /// that only duplicate data are 0), or nullptr when every thread owns distinct elements.
  llvm::Value *emitOwnerPredicate(const LinearLayout &layout);
  /// Register bits that only duplicate data (a register r is a copy when r & mask != 0).
  static int32_t duplicateRegisterMask(const LinearLayout &layout);

  llvm::Value *threadId() const { return threadId_; }
  /// tid % 32 and tid / 32, emitted in the entry block on first use.
  llvm::Value *laneId();
  llvm::Value *warpId();
  /// The shared scratch of `op`, `bytes` long, at the op's `scratch_offset` (allocate_shared,
  /// cpp/analysis/allocation.h). Ordering against other ops is membar's `barrier` ops; the
  /// lowering emits only the barrier between its own stores and loads of the scratch.
  llvm::Value *sharedScratch(const ir::Operation &op, int64_t bytes);
  /// The buffer of a local_alloc, at its `offset` (allocate_shared).
  llvm::Value *sharedBuffer(const ir::Operation &localAlloc, int64_t bytes);
  /// bar.sync 0: every thread of the CTA. A barrier inside an op's lowering (`groupsInFlight`
  /// false) first waits down to the op's `inner_wgmma_wait` (the wgmma_waits pass sets it when
  /// groups are in flight there); a `barrier` op leaves what the wgmma_wait before it left.
  /// After a warp_specialize op (the producer warps left), a named barrier of the consumer
  /// threads instead: `bar.sync 1, num_warps * 32`.
  void emitBarrier(bool groupsInFlight = false);
  /// wgmma.wait_group N with N = the groups in flight: waits for nothing, but orders for
  /// ptxas what the earlier waits retired (lower_matrix_wgmma.cpp, C7517).
  void emitWgmmaOrderMark();
  /// Waits until at most `keep` wgmma groups are in flight: a `wgmma_wait {pending = keep}`.
  void retireWgmma(size_t keep) {
    if (pendingWgmma_.size() > keep)
      waitForWgmma(pendingWgmma_.size() - keep);
  }
  /// The thread that issues TMA copies and arrives with expect_tx: thread 0, or the first
  /// producer thread inside a warp_specialize region (lower_warp_specialize.cpp).
  int issuerThread() const { return issuerThread_; }
  /// i1, true in one thread of issuerThread()'s warp: the lane elect.sync chose there, at the
  /// kernel's entry (every warp converged), once per warp asked for, so every op that asks
  /// gets the same thread. Not `tid == issuerThread()`: ptxas cannot tell that such a
  /// predicate holds in one thread, and wraps each TMA instruction (whose operands must be
  /// warp-uniform) in a loop over the threads where it holds (ELECT + BRA.U.ANY), where an
  /// elected predicate lets it issue the copy once (as Triton's and CUTLASS's elect_one_sync).
  llvm::Value *issuer();
  /// Lowers a warp_specialize op: the producer warps run its region and exit, the consumer
  /// warps go on (lower_warp_specialize.cpp).
  void lowerWarpSpecialize(const ir::Operation &op);
  /// Producer warps the kernel adds to its num_warps (0 unless it has a warp_specialize op):
  /// the block has num_warps + producerWarps() warps.
  int producerWarps() const { return producerWarps_; }
  llvm::Value *callIntrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type *> types,
                             llvm::ArrayRef<llvm::Value *> args);
  llvm::Value *i32(int64_t value) { return builder_.getInt32(static_cast<uint32_t>(value)); }
  /// Lowers a region's ops (up to its terminator) at the insertion point and returns the
  /// registers of the terminator's operands: inlines the combiner of reduce and scan.
  /// Straight-line code on scalars: in-flight wgmma groups stay in flight across it.
  std::vector<const Registers *> lowerInlineRegion(const ir::Block &block) {
    return lowerRegionBody(block, /*controlFlow=*/false);
  }

private:
  /// Before `op`: fails when it reads a result whose wgmma group is in flight, or is control
  /// flow with groups in flight (the waits were not placed). wgmma_groups.cpp has these and
  /// the loop-carried groups.
  void checkWgmmaWaited(const ir::Operation &op) const;
  /// Waits until the oldest `groups` pending wgmma groups are complete and ties their results'
  /// registers to the wait, so no use moves above it.
  void waitForWgmma(size_t groups);
  void lowerBlock(const ir::Block &block);
  /// Lowers a region's ops up to its terminator and returns the terminator's operands. At
  /// the terminator of control flow (`controlFlow`) no wgmma group is in flight but those a
  /// loop carries (`carried`, see lowerFor).
  struct CarriedGroups;
  std::vector<const Registers *> lowerRegionBody(const ir::Block &block, bool controlFlow = true,
                                                 CarriedGroups *carried = nullptr);
  /// Lowers one op; errors other than CompileError become one naming the op.
  void lowerOp(const ir::Operation &op);
  void dispatchOp(const ir::Operation &op);
  void lowerFor(const ir::Operation &op);
  void lowerIf(const ir::Operation &op);
  void lowerWhile(const ir::Operation &op);
  /// One phi per register of each value type, in `block` (the insertion point).
  std::vector<Registers> createPhis(const std::vector<ir::Value *> &values,
                                    const ir::Operation &op);
  void emitThreadIds();
  llvm::IRBuilder<> builderAfterThreadId();

  llvm::Module &module_;
  llvm::IRBuilder<> builder_;
  int numWarps_;
  std::unique_ptr<analysis::AxisInfoAnalysis> axisInfo_;
  std::map<const ir::Value *, Registers> values_;
  std::map<const ir::Value *, RegisterMaker> lazyValues_;
  std::map<const ir::Value *, SharedOperand> sharedOperands_;
  /// The wgmma groups a `for` may leave in flight across its back edge: those of its
  /// `wgmma_carried` products (the wgmma_waits pass), oldest first. At the header they may be
  /// pending (not on the first iteration: waiting for a group more than are pending is
  /// harmless, wgmma.wait_group counts).
  struct CarriedGroups {
    std::vector<unsigned> indices; // among the yielded values
    /// Phis in the header for each one's register A words (empty when A is in shared memory):
    /// live until the group's wait, across the back edge too.
    std::vector<std::vector<llvm::PHINode *>> inputs;
    std::vector<bool> inFlight; // at the yield: left in flight (else waited for)
  };
  /// The groups `loop` carries, with their input phis created at the insertion point (the
  /// header, before its branch).
  CarriedGroups carriedWgmmaGroups(const ir::Operation &loop);
  /// At the loop's yield: fills `carried.inFlight` from the groups still pending there (each
  /// must be a carried value's, with the inputs the header expects).
  void markCarriedInFlight(const ir::Operation &yield, CarriedGroups &carried);
  /// Whether `value` has a user not lowered yet (a wait need not tie registers no op reads).
  bool hasUnloweredUse(const ir::Value *value) const;

  bool usesWgmma_ = false;
  int issuerThread_ = 0;
  int producerWarps_ = 0;
  bool consumersOnly_ = false; // past the role split: barriers name the consumers
  /// The `inner_wgmma_wait` of the op being lowered: its own barrier waits down to it.
  std::optional<int64_t> innerWgmmaWait_;
  bool fastDivision_ = false;
  bool pipelineWgmma_ = false;
  bool convergentWaits_ = false;
  std::set<const ir::Operation *> loweredOps_;
  int smVersion_ = 80;
  struct PendingWgmma {
    const ir::Value *result;
    std::vector<llvm::Value *> inputs; // register A words
  };
  std::vector<PendingWgmma> pendingWgmma_; // in commit order
  std::map<std::string, LinearLayout> layouts_;
  llvm::Value *threadId_ = nullptr, *laneId_ = nullptr, *warpId_ = nullptr;
  llvm::Value *elected_ = nullptr;       // elect.sync's predicate at the entry
  std::map<int, llvm::Value *> issuers_; // issuer() per issuing warp
  llvm::GlobalVariable *sharedMemory_ = nullptr;
  int64_t sharedBytes_ = 0; // the func's shared_size (allocate_shared)
  llvm::Value *sharedAt(const ir::Operation &op, int64_t offset, int64_t bytes);
};

// Per-kind lowering entry points, one file each. Each throws a CompileError about `op` for
// what it does not support.
/// constant, program_id, num_programs, make_range, addptr, arithmetic, compares, select,
/// casts (lower_elementwise.cpp).
void lowerElementwiseOp(KernelLowering &lowering, const ir::Operation &op);
/// Whether lowerElementwiseOp has an instruction per element for `code` (its table).
bool hasElementLowering(ir::OpCode code);
/// One register of extf / truncf: fp8 codes and rounding toward zero included (lower_fp8.cpp).
llvm::Value *emitFloatConversion(KernelLowering &lowering, const ir::Operation &op,
                                 llvm::Value *value, llvm::Type *resultType);
/// inline_asm: LLVM inline assembly over groups of `pack` elements (lower_inline_asm.cpp).
void lowerInlineAsm(KernelLowering &lowering, const ir::Operation &op);
/// load, store (lower_memory.cpp).
void lowerMemoryOp(KernelLowering &lowering, const ir::Operation &op);
/// splat, broadcast, expand_dims, reshape, convert_layout (lower_layout.cpp).
void lowerLayoutOp(KernelLowering &lowering, const ir::Operation &op);
/// exp, log, sqrt, sin, erf, fma, ... (ops.def "math"; lower_math.cpp).
void lowerMathOp(KernelLowering &lowering, const ir::Operation &op);
/// atomic_rmw, atomic_cas (lower_atomic.cpp).
void lowerAtomicOp(KernelLowering &lowering, const ir::Operation &op);

/// One access of `width` consecutive elements at `address` (aligned to width * element
/// bytes), packed so that the backend emits a single ld/st .v2/.v4 (lower_memory.cpp).
std::vector<llvm::Value *> emitVectorLoad(KernelLowering &lowering, llvm::Value *address,
                                          llvm::Type *memoryType, llvm::Type *registerType,
                                          int width, bool isVolatile = false);
/// `values` in register types, converted to memoryType and stored as one access.
void emitVectorStore(KernelLowering &lowering, llvm::Value *address,
                     llvm::ArrayRef<llvm::Value *> values, llvm::Type *memoryType,
                     bool isVolatile = false);

/// Largest power of two dividing `value` (value > 0), capped at 2^30; 2^30 for 0.
int64_t largestPowerOfTwoDivisor(int64_t value);

} // namespace tessera::codegen
