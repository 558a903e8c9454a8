// Layout rules of dots that more than one layout pass applies (accelerate_matmul.cpp holds
// them): remove_layout_conversions repeats them as its rewrites expose new cases.
#pragma once

#include "ir/ir.h"

namespace tessera::transforms {

/// truncf(convert_layout(x : #mma)) becomes convert_layout(truncf(x)) in `func`: the
/// conversion out of a dot's accumulator layout then moves 16-bit instead of 32-bit values.
/// Returns whether anything changed.
bool moveCastsBeforeAccumulatorConversions(ir::Operation *func);

} // namespace tessera::transforms
