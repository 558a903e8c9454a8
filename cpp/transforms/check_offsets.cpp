// check_offsets: the narrow integer add, sub and mul that compute pointer offsets are marked
// `check_overflow`, so that an offset that wraps is reported where it wraps. Runs when the
// module attribute check_offsets is 1 (the interpreter always; the GPU with debug=True).
//
//   %r = muli %row, %stride : (i32, i32) -> i32
//   %p = addptr %a, %r : (ptr<f16>, i32) -> ptr<f16>
// becomes
//   %r = muli %row, %stride {check_overflow = true} : (i32, i32) -> i32
//   %p = addptr %a, %r : (ptr<f16>, i32) -> ptr<f16>
//
// The interpreter raises at such an op when its exact result does not fit its type (lane,
// operands and values in the message); codegen computes it with llvm.s{add,sub,mul}.with.overflow
// and fails a device assertion (__assertfail) naming the op, as Triton's sanitize_overflow does
// under debug. Only the address slice (analysis/address_slice.h) is checked, after
// widen_offsets: offsets of tensors past 2**31 elements are i64 by then, so a narrow offset
// that overflows points past every tensor it could address, which is always a bug; arithmetic
// that wraps on purpose (hashes, random numbers) is not in the slice.
#include "analysis/address_slice.h"
#include "ir/pass_manager.h"

namespace tessera::ir {

namespace {

bool isCheckedArithmetic(const Operation &op) {
  if (op.code() != OpCode::AddI && op.code() != OpCode::SubI && op.code() != OpCode::MulI)
    return false;
  int width = op.result()->type().elementType().bitWidth();
  return width > 1 && width < 64;
}

void runCheckOffsets(Module &module) {
  if (module.intAttrOr("check_offsets", 0) == 0)
    return;
  for (Operation *func : module.functions()) {
    std::set<Value *> seen;
    for (const analysis::OffsetUse &use : analysis::offsetUses(*func))
      analysis::walkAddressSlice(use.op->operand(use.operand), seen, [](Value *value) {
        Operation *def = value->definingOp();
        if (def && isCheckedArithmetic(*def))
          def->setAttr("check_overflow", true);
      });
  }
}

} // namespace

TESSERA_REGISTER_PASS(check_offsets, "check_offsets",
                      "mark the narrow add/sub/mul of pointer offsets check_overflow (module "
                      "attribute check_offsets)",
                      runCheckOffsets);

} // namespace tessera::ir
