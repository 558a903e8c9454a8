// MmaEncoding: the accumulator layout of the tensor-core instructions, as Triton's
// #ttg.nvidia_mma: version 2 is mma.sync (sm_80 and later), version 3 wgmma (sm_90a).
//
// accelerate_matmul gives each dot's result this layout; its operands take DotOperand layouts
// (dot_operand.h) derived from it. Codegen sees only toLinearLayout(): one m16n8 accumulator
// fragment per warp and instruction, warps tiling the CTA, registers repeating the CTA tile.
#pragma once

#include "layout/encoding.h"
#include "layout/linear_layout.h"

#include <memory>
#include <vector>

namespace tessera {

class MmaEncoding : public Encoding {
public:
  /// warpsPerCTA = [warps along M, warps along N], powers of two. Version 2 (mma.sync):
  /// instrShape = [16, 8] (m16n8, the accumulator tile of one instruction). Version 3
  /// (wgmma): warps along M a multiple of 4 (a warpgroup of 4 warps computes m64nN, 16 rows
  /// per warp) and instrShape = [16, N], N a power of two in 8..256 (the rows and columns one
  /// warp holds per instruction). Throws std::invalid_argument otherwise.
  MmaEncoding(int version, std::vector<int> warpsPerCTA, std::vector<int> instrShape = {16, 8});

  int getVersion() const { return version; }
  const std::vector<int> &getWarpsPerCTA() const { return warpsPerCTA; }
  const std::vector<int> &getInstrShape() const { return instrShape; }
  int getNumWarps() const { return warpsPerCTA[0] * warpsPerCTA[1]; }
  bool isWgmma() const { return version == 3; }

  std::string str() const override;
  bool equals(const Encoding &other) const override;
  int rank() const override { return 2; }
  /// [M, N] -> accumulator layout. Per instruction (PTX ISA, "Matrix Fragments for
  /// mma.m16n8k16", accumulators c0..c3): register bits step n by 1 then m by 8; lane bits step
  /// n by 2, 4 (threadID_in_group) then m by 1, 2, 4 (groupID). Warp bits step N first (8, 16,
  /// ...), then M (16, 32, ...). Registers then repeat the CTA tile [16 wm, 8 wn] along N, then
  /// M. Steps past the tensor's extent are broadcast (zero).
  /// Version 3 (PTX ISA "wgmma .m64nNk16 register fragment D"): per warp the same m16n8 tiles,
  /// registers stepping n by 8 up to N after n by 1 and m by 8; warp bits step M first (16,
  /// 32: the warpgroup's 64 rows, then 64, ...), then N (by N); registers repeat the CTA tile
  /// [16 wm, N wn] along N, then M. With wn = 1 it equals version 2's layout.
  LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const override;

private:
  int version;
  std::vector<int> warpsPerCTA, instrShape;
};

namespace layout_detail {

/// One basis vector of a 2-D tile layout: `value` along tensor dim `dim`.
struct TileStep {
  int dim;
  int32_t value;
};

/// A 2-D register layout from the steps of each hardware level: steps at or past the shape's
/// extent become zero (broadcast); then registers repeat the tile (`tile` elements per dim)
/// along the dims of `repeatOrder`, first dim first, until the shape is covered. Shared by
/// the Mma and DotOperand encodings.
LinearLayout buildTileLayout(const std::vector<int64_t> &shape,
                             const std::vector<TileStep> &registers,
                             const std::vector<TileStep> &lanes, const std::vector<TileStep> &warps,
                             const std::vector<int64_t> &tile, const std::vector<int> &repeatOrder);

} // namespace layout_detail

} // namespace tessera
