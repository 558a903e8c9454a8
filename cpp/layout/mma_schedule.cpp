// scheduleMma: locate every instruction's fragments in the operands' registers.
//
// The layouts are linear and their lowest register bits are one instruction's fragment
// (mma.h, dot_operand.h), so fragment element e of the instruction whose tile starts at
// (m, n, k) is the register at lane 0 whose coordinates are the tile origin XOR (= plus, the
// origin's bits lie above the fragment's) those of register e. Tiles of one warp are
// 16 * warpsM rows and 8 * warpsN columns apart.
#include "layout/mma_schedule.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace tessera {

namespace {

using Coords = std::vector<int32_t>;

Coords coordsOf(const LinearLayout &layout, int reg) {
  Coords coords;
  for (const auto &entry : layout.apply({{kRegisterDim, reg}}))
    coords.push_back(entry.second);
  return coords;
}

class RegisterFinder {
public:
  RegisterFinder(const LinearLayout &layout, int fragmentSize) {
    for (int reg = layout.getInDimSize(kRegisterDim); reg-- > 0;)
      registers_[coordsOf(layout, reg)] = reg; // the smallest register wins
    for (int e = 0; e < fragmentSize; ++e)
      fragment_.push_back(coordsOf(layout, e));
  }

  std::vector<int> fragmentAt(int32_t row, int32_t col) const {
    std::vector<int> regs;
    for (const Coords &offset : fragment_)
      regs.push_back(find({row + offset[0], col + offset[1]}));
    return regs;
  }

  int find(const Coords &coords) const {
    auto it = registers_.find(coords);
    if (it == registers_.end())
      throw std::invalid_argument("scheduleMma: no register holds element (" +
                                  std::to_string(coords[0]) + ", " + std::to_string(coords[1]) +
                                  ")");
    return it->second;
  }

private:
  std::map<Coords, int> registers_;
  std::vector<Coords> fragment_;
};

} // namespace

MmaSchedule scheduleMma(const LinearLayout &a, const LinearLayout &b, const LinearLayout &c,
                        const std::vector<int> &warpsPerCTA, int kWidth) {
  RegisterFinder findA(a, 4 * kWidth), findB(b, 2 * kWidth), findC(c, 4);
  int64_t m = c.getOutDimSize(tensorDimName(0)), n = c.getOutDimSize(tensorDimName(1));
  int64_t k = a.getOutDimSize(tensorDimName(1));
  int64_t strideM = 16 * int64_t(warpsPerCTA[0]), strideN = 8 * int64_t(warpsPerCTA[1]);
  int64_t instrK = 8 * kWidth;
  int64_t numM = std::max<int64_t>(1, m / strideM), numN = std::max<int64_t>(1, n / strideN);
  MmaSchedule schedule;
  for (int64_t kk = 0; kk < k / instrK; ++kk)
    for (int64_t mm = 0; mm < numM; ++mm)
      for (int64_t nn = 0; nn < numN; ++nn) {
        MmaStep step;
        step.m = static_cast<int>(mm * strideM);
        step.n = static_cast<int>(nn * strideN);
        step.k = static_cast<int>(kk * instrK);
        step.a = findA.fragmentAt(step.m, step.k);
        step.b = findB.fragmentAt(step.k, step.n);
        step.c = findC.fragmentAt(step.m, step.n);
        schedule.steps.push_back(std::move(step));
      }
  for (int reg = 0; reg < c.getInDimSize(kRegisterDim); ++reg)
    schedule.resultSources.push_back(findC.find(coordsOf(c, reg)));
  return schedule;
}

} // namespace tessera
