// The layout passes: assign_layouts -> coalesce -> remove_layout_conversions take the
// layout-free tile IR of the front end to IR where every tensor type carries an encoding
// (docs/architecture.md). Entry points for tests and pipelines, plus the few layout rules
// the three passes share.
#pragma once

#include "ir/builder.h"
#include "ir/ir.h"
#include "layout/blocked.h"
#include "layout/slice.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace tessera::transforms {

/// Every tensor gets the default Blocked encoding for its shape, Slice encodings where values
/// feed expand_dims, and convert_layout where a user needs another encoding.
void assignLayouts(ir::Module &module);
/// Loads and stores get the Blocked encoding that gives each thread up to 16-byte accesses,
/// with convert_layout ops around them (left for remove_layout_conversions).
void coalesce(ir::Module &module);
/// Folds no-op and chained convert_layout ops, recomputes cheap producers in the needed
/// encoding and carries loop values in the layout they are computed in, so that conversions
/// disappear (or at least leave loops).
void removeLayoutConversions(ir::Module &module);
/// Replaces the conversion `convert` into a dot operand by a local_alloc of its source in
/// `shared` (before it) and a local_load of that buffer before each user: the operand is
/// read from shared memory where it is used (stage_invariant_operands.cpp; also
/// materialize_wgmma_operands.cpp).
void stageThroughSharedMemory(ir::Operation *convert, const EncodingPtr &shared);

/// Whether a conversion into a wgmma A operand moves no data between threads: wgmma reads
/// that operand from the registers it is in (materialize_wgmma_operands.cpp stages every other
/// wgmma operand conversion through shared memory).
bool wgmmaOperandStaysInRegisters(const ir::Operation &convert);

constexpr int kThreadsPerWarp = 32;

/// The module's `num_warps` attribute (default 4).
inline int moduleNumWarps(const ir::Module &module) {
  return static_cast<int>(module.intAttrOr("num_warps", 4));
}

/// The encoding assign_layouts gives a tensor of this shape: one per shape, whatever the
/// element type, so that elementwise chains (compares, casts) need no conversions.
inline EncodingPtr defaultEncoding(const std::vector<int64_t> &shape, int numWarps) {
  return defaultBlocked(shape, numWarps, kThreadsPerWarp);
}

inline bool sameEncoding(const EncodingPtr &a, const EncodingPtr &b) {
  if (!a || !b)
    return !a && !b;
  return a == b || a->equals(*b);
}

/// Ops whose result may take any register layout, each tensor operand then following from
/// it (see operandEncoding): elementwise ops, load, broadcast, expand_dims and the sources
/// splat, make_range and constant.
inline bool followsResultLayout(const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Load:
  case ir::OpCode::Broadcast:
  case ir::OpCode::ExpandDims:
  case ir::OpCode::Splat:
  case ir::OpCode::MakeRange:
  case ir::OpCode::Constant: return op.numResults() == 1 && op.result()->type().isTensor();
  default:
    return op.hasTrait(ir::trait::ELEMENTWISE) && op.numResults() == 1 &&
           op.result()->type().isTensor();
  }
}

/// The encoding tensor operand `index` of `op` needs when op works in `layout` (its result's
/// encoding; a store's: its pointers'). Null for scalar operands and ops not listed in
/// followsResultLayout (other than store).
inline EncodingPtr operandEncoding(const ir::Operation &op, unsigned index,
                                   const EncodingPtr &layout) {
  if (!op.operand(index)->type().isTensor() || !layout)
    return nullptr;
  if (op.code() == ir::OpCode::ExpandDims)
    return std::make_shared<const SliceEncoding>(static_cast<int>(op.intAttr("axis")), layout);
  if (op.code() == ir::OpCode::Scan)
    return layout;
  if (op.code() == ir::OpCode::Reduce) { // its result is the operands' layout sliced at axis
    const auto *slice = dynamic_cast<const SliceEncoding *>(layout.get());
    return slice && slice->getDim() == op.intAttr("axis") ? slice->getParent() : nullptr;
  }
  if (op.code() == ir::OpCode::Store || followsResultLayout(op))
    return layout;
  return nullptr;
}

/// Whether `op` can compute its results in `layout`, its tensor operands then in
/// operandEncoding(op, i, layout): the ops of followsResultLayout in any layout, scan in any
/// layout, reduce in any Slice along its axis (of the layout its operands then take).
inline bool canProduceLayout(const ir::Operation &op, const EncodingPtr &layout) {
  if (followsResultLayout(op) || op.code() == ir::OpCode::Scan)
    return true;
  if (op.code() != ir::OpCode::Reduce || !layout)
    return false;
  const auto *slice = dynamic_cast<const SliceEncoding *>(layout.get());
  return slice && slice->getDim() == op.intAttr("axis");
}

struct OperandUse {
  ir::Operation *user;
  unsigned index;
};

/// Every use of `value`: (user, operand index), in the order of value->users().
inline std::vector<OperandUse> usesOf(ir::Value *value) {
  std::vector<OperandUse> uses;
  std::vector<ir::Operation *> seen;
  for (ir::Operation *user : value->users()) {
    if (std::find(seen.begin(), seen.end(), user) != seen.end())
      continue;
    seen.push_back(user);
    for (unsigned i = 0; i < user->numOperands(); ++i)
      if (user->operand(i) == value)
        uses.push_back({user, i});
  }
  return uses;
}

/// convert_layout(value) to `encoding`, created at the builder's insertion point.
inline ir::Value *createConvert(ir::Builder &builder, ir::Value *value, EncodingPtr encoding) {
  return builder
      .create(ir::OpCode::ConvertLayout, {value}, {value->type().withEncoding(std::move(encoding))})
      ->result();
}

} // namespace tessera::transforms
