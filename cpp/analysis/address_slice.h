// The address slice of a kernel: the integer values that become pointer offsets (the offset of
// every `addptr`, the integer of every `inttoptr`), followed backward through the ops that
// compute them, and the kernel arguments a pointer may point into. Read by the tir passes
// widen_offsets (recompute the slice in i64 for tensors past 2**31 elements) and check_offsets
// (mark its narrow add/sub/mul for an overflow check), so that both agree on what the slice is.
#pragma once

#include "ir/ir.h"

#include <functional>
#include <set>
#include <vector>

namespace tessera::analysis {

/// How a value of the slice continues to the values it is computed from.
enum class SliceStep {
  Arithmetic, // addi subi muli divsi remsi maxsi minsi andi ori xori shli shrsi: its operands
  Shape,      // splat broadcast expand_dims reshape convert_layout trans: its operand
  Select,     // select: the two chosen values (never the condition)
  Extend,     // extsi: the narrower value it sign-extends
  Constant,   // constant: none (its value, at any width)
  Leaf,       // anything else (program ids, aranges, arguments, loads, unsigned ops): none
};

/// The step of an op defining a slice value. The Arithmetic ops compute, in i64 on operands
/// sign-extended from i32, the sign extension of their i32 result whenever that one does not
/// overflow: that is what lets widen_offsets recompute them and change no other result.
SliceStep sliceStep(const ir::Operation &op);

/// A pointer offset: the op that adds it (addptr, inttoptr) and the operand index.
struct OffsetUse {
  ir::Operation *op;
  unsigned operand;
};

/// Every pointer offset of `func`, in program order.
std::vector<OffsetUse> offsetUses(ir::Operation &func);

/// Calls `visit` once on each value of the backward slice of `offset`: through the steps
/// above, into `for` loops (a carried value: its initial and its yielded value) and out of
/// `if`s (both yielded values). `seen` is shared across calls so that each value is visited
/// once per kernel.
void walkAddressSlice(ir::Value *offset, std::set<ir::Value *> &seen,
                      const std::function<void(ir::Value *)> &visit);

/// The entry-block arguments of `func` that `pointer` may point into, through addptr, the
/// shape ops, select and loop-carried / if-yielded pointers. Sets `unknown` when some origin is
/// not an argument (a pointer loaded from memory, inttoptr, a while loop's value).
std::set<unsigned> pointerOrigins(ir::Operation &func, ir::Value *pointer, bool &unknown);

} // namespace tessera::analysis
