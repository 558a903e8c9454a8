// The ldmatrix plan: how a warp fills a register layout (a dot operand) from a shared tile
// with ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].b16, found and checked on linear layouts;
// the same plan drives stmatrix (sm_90), which moves the same fragments the other way.
//
// ldmatrix (PTX ISA): lanes 8j..8j+7 give the addresses of the eight 16-byte rows of 8x8
// matrix j; thread t receives from matrix j one 32-bit word: row t/4, 16-bit columns
// 2(t%4), 2(t%4)+1 (with .trans: rows 2(t%4), 2(t%4)+1 of column t/4). A plan is valid when,
// for every instruction, lane and word, what ldmatrix delivers is what the register layout
// says that lane's registers hold. Codegen (lower_shared_buffers.cpp) emits plans; the CPU tests
// execute them on a simulated warp.
#pragma once

#include "layout/linear_layout.h"
#include "layout/shared_tile_layout.h"

#include <optional>
#include <vector>

namespace tessera {

struct LdmatrixPlan {
  bool transposed = false;
  /// 1, 2 or 4 matrices per instruction.
  int numMatrices = 4;
  /// Elements per 32-bit word: 2 (16-bit elements) or 1 (32-bit elements, non-transposed).
  int elementsPerWord = 2;
  /// Registers of the layout one instruction fills: numMatrices * elementsPerWord. Instruction
  /// i fills registers [i * registersPerInstruction, (i + 1) * registersPerInstruction):
  /// word j of its result holds registers i * registersPerInstruction + j * elementsPerWord
  /// + (0 .. elementsPerWord - 1), low half first.
  int registersPerInstruction = 8;
  /// (register = instruction index, lane, warp) -> element offset in the tile of the row
  /// address that lane gives (a linear map: codegen emits it as XORs of the thread id).
  LinearLayout addresses;
};

/// The plan that fills `registerLayout` (register, lane, warp -> dim0, dim1) from `tile`
/// holding elements of `elemBytes` bytes (2 or 4), or nullopt when ldmatrix cannot (elements
/// not in 16-byte rows of the tile, .trans of 32-bit elements, too few registers...). Tries
/// x4, then x2, then x1; non-transposed, then transposed.
std::optional<LdmatrixPlan> planLdmatrix(const LinearLayout &registerLayout,
                                         const SharedTileLayout &tile, int elemBytes);

/// The plan that stores the registers of `registerLayout` into `tile` with
/// stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].b16 (sm_90): stmatrix takes each lane's words
/// from the same fragment places that ldmatrix fills, so it is the ldmatrix plan of the same
/// registers run the other way. Only where it pays: 16-bit elements whose plain stores
/// (registers at consecutive offsets) move less than 16 bytes per lane, and rows that
/// take no more shared-memory wavefronts than those stores (warp 0 simulated). The epilogue
/// of a wgmma or mma.sync product converted for coalesced global stores is the case: its
/// registers hold pairs of columns, 4 bytes per st.shared, against 16 per stmatrix row.
std::optional<LdmatrixPlan> planStmatrix(const LinearLayout &registerLayout,
                                         const SharedTileLayout &tile, int elemBytes);

/// Executes `plan` on simulated shared memory: returns, per (register, lane, warp) in
/// SharedAccessTable order, the element offset of the tile that the register receives. A
/// reference for the tests, written from the PTX ISA's description of ldmatrix.
std::vector<int64_t> simulateLdmatrix(const LdmatrixPlan &plan, int numRegisters, int numWarps);

/// The row addresses of warp `warp` as a SharedAccessTable of one 16-byte access per lane and
/// instruction (numRegisters = instructions), for the bank-conflict simulator (vectorWidth =
/// 16 / elemBytes registers of the table's element size).
SharedAccessTable ldmatrixRowAccesses(const LdmatrixPlan &plan, int numWarps, int elemBytes);

} // namespace tessera
