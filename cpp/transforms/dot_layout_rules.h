// Layout rules of dots that more than one layout pass applies (accelerate_matmul.cpp holds
// them): remove_layout_conversions repeats them as its rewrites expose new cases.
#pragma once

#include "ir/ir.h"

namespace tessera::transforms {

/// truncf(convert_layout(x : #mma)) becomes convert_layout(truncf(x)) in `func`: the
/// conversion out of a dot's accumulator layout then moves 16-bit instead of 32-bit values.
/// Returns whether anything changed.
bool moveCastsBeforeAccumulatorConversions(ir::Operation *func);

/// Retypes, in place, the values computed from dot results by layout-following ops (and the
/// loop-carried values they become) in the dots' #mma layouts, with conversions where users
/// need the old layouts. The first step of remove_layout_conversions, not a pass of its own
/// (remove_layout_conversions_accumulators.cpp). Returns whether anything changed.
bool propagateAccumulatorLayouts(ir::Operation *func);

} // namespace tessera::transforms
