// Layout conversion planning: how to move a tensor from one register layout to another.
//
// remove_layout_conversions asks what a convert_layout costs; codegen asks how to emit it.
// Both get the answer from a map between the two layouts' hardware indices (a choice of
// src^-1 ∘ dst) with the hardware dims that do not move quotiented out (docs/architecture.md):
// nothing moves -> free; registers only -> a static permutation; lanes -> warp shuffles;
// warps (or blocks) -> a round trip through shared memory.
#pragma once

#include "layout/linear_layout.h"
#include "layout/shared_tile_layout.h"

#include <optional>
#include <vector>

namespace tessera {

/// Ordered from cheapest to most expensive.
enum class ConversionKind { None, RegisterPermutation, WarpShuffle, SharedMemory };

const char *conversionKindName(ConversionKind kind);

struct ConversionPlan {
  ConversionKind kind = ConversionKind::None;
  /// Destination hardware index -> a source hardware index holding the same element, chosen
  /// so that the dims the kind does not move (lane, warp and block for a permutation; warp
  /// and block for shuffles; block for shared memory) map onto themselves. Those dims are
  /// dropped from the outputs, and from the inputs unless they still steer the moving dims
  /// (e.g. a shuffle whose source lane depends on the warp keeps "warp" as an input).
  /// Input dims: dst's; output dims: src's. Empty for None.
  /// Example: src = 2x2 registers listed dim1-first, dst = the same listed dim0-first:
  /// kind RegisterPermutation, map {register: [[2], [1]]} -> {register: 4}.
  LinearLayout map;
  /// For None and RegisterPermutation: dst register i takes src register registerSources[i]
  /// (in the same lane and warp).
  std::vector<int32_t> registerSources;
  /// For SharedMemory: where the tile sits in shared memory (see chooseConversionTile).
  std::optional<SharedTileLayout> sharedTile;
};

/// Plans the conversion of a tensor held in `src` to `dst`. Both are register layouts
/// (input dims register, lane, warp, block; output dims dim0, dim1, ...) of the same shape;
/// throws std::invalid_argument otherwise. The kind is the cheapest that the data allows:
/// None iff both layouts are equal; RegisterPermutation iff one register table serves every
/// thread; WarpShuffle iff every element a thread needs is held in its own warp (broadcast
/// copies count). elemBytes only steers the shared-memory swizzle.
ConversionPlan planConversion(const LinearLayout &src, const LinearLayout &dst, int elemBytes = 4);

/// The shared tile for a conversion through shared memory: row-major along the dim that
/// src's registers vectorize (its first register basis), with the XOR swizzle that minimizes
/// the wavefronts of src's stores plus dst's loads, each as wide as sharedAccessVectorWidth
/// allows (warp 0 simulated). Ties go to no swizzle, then to wider swizzle chunks.
SharedTileLayout chooseConversionTile(const LinearLayout &src, const LinearLayout &dst,
                                      int elemBytes = 4);

/// The number of registers one shared-memory access of `layout` may cover along the tile's
/// fastest dim: getNumConsecutiveInOut capped at 16 bytes and by the swizzle's vec.
int sharedAccessVectorWidth(const LinearLayout &layout, const SharedTileLayout &tile,
                            int elemBytes);

} // namespace tessera
