// Constant arithmetic for the canonicalize pass: evaluates one elementwise op on constant
// operands exactly as the target would (integers wrap at their width, floats are rounded once
// to the element type), or declines when the result would be undefined or inexact.
#pragma once

#include "ir/ir.h"

#include <optional>
#include <vector>

namespace tessera::ir {

/// The constant attribute for an integer of `kind` given its low bits: bool for i1, else the
/// sign-extended int64_t (so i32 0xffffffff reads back as -1).
Attribute integerAttribute(uint64_t bits, ScalarKind kind);

/// The low `kind`-width bits of an integer constant attribute (bool or int64_t).
std::optional<uint64_t> integerBits(const Attribute &value, ScalarKind kind);

/// The value of a float constant attribute (double, or an int64_t written without a '.').
std::optional<double> floatValue(const Attribute &value);

/// Whether `value` is a constant zero (a `constant` of 0 / 0.0 / -0.0, or a splat of one).
bool isZeroConstant(const Value *value);

/// `value` rounded to the nearest (ties to even) value of a float kind; overflow gives inf.
/// Returns nullopt for the f8 kinds, whose overflow rules this pass does not model.
std::optional<double> roundToFloatKind(double value, ScalarKind kind);

/// Evaluates elementwise `op` (an integer, float, compare or cast op) on constant `operands`
/// (their "value" attributes). Returns the result's attribute, or nullopt when the op is not
/// folded: unsupported op or kind, division by zero, out-of-range shift or conversion.
std::optional<Attribute> foldConstantOp(const Operation &op,
                                        const std::vector<Attribute> &operands);

} // namespace tessera::ir
