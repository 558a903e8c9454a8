// Shared-memory allocation (analysis/allocation.h) and barrier insertion (analysis/membar.h)
// on small kernels written as IR text: offsets reused across disjoint live ranges, rings kept
// live over their loop and until their copies drain, and the barriers that follow.
#include "analysis/allocation.h"
#include "analysis/membar.h"
#include "analysis/shared_footprint.h"
#include "ir/parser.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::analysis {
namespace {

const char *kEncodings = R"(
#blocked = #blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#blocked1 = #blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#shared = #shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}>
)";

/// A conversion of %src (tensor<N x i32>) that moves data between lanes (shared memory).
std::string convert(const std::string &result, const std::string &source, int64_t n) {
  std::string type = "tensor<" + std::to_string(n) + "xi32, ";
  return "    " + result + " = convert_layout " + source + " : (" + type + "#blocked>) -> " + type +
         "#blocked1>\n";
}

std::string range(const std::string &result, int64_t n) {
  return "    " + result + " = make_range {end = " + std::to_string(n) +
         ", start = 0} : () -> tensor<" + std::to_string(n) + "xi32, #blocked>\n";
}

std::unique_ptr<ir::Module> parse(const std::string &body, const std::string &arguments = "") {
  return ir::parseModule(std::string(kEncodings) + "module {num_warps = 4} {\n  func @k(" +
                         arguments + ") {\n" + body + "    return : () -> ()\n  }\n}\n");
}

ir::Operation &funcOf(ir::Module &module) { return *module.functions().front(); }

/// Every pair of buffers live at once has disjoint bytes; offsets are aligned; all fit.
void expectValid(const SharedAllocation &allocation) {
  const std::vector<SharedBuffer> &buffers = allocation.buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(buffers[i].offset % kSharedAlignment, 0) << allocation.str();
    EXPECT_LE(buffers[i].end(), allocation.totalBytes()) << allocation.str();
    for (size_t j = i + 1; j < buffers.size(); ++j)
      if (buffers[i].liveAtOnce(buffers[j]))
        EXPECT_FALSE(buffers[i].overlapsBytes(buffers[j])) << i << ", " << j << "\n"
                                                           << allocation.str();
  }
}

std::vector<int64_t> scratchOffsets(const SharedAllocation &allocation) {
  std::vector<int64_t> offsets;
  for (const SharedBuffer &buffer : allocation.buffers())
    if (buffer.isScratch)
      offsets.push_back(buffer.offset);
  return offsets;
}

int countBarriers(ir::Operation &func) {
  int count = 0;
  func.walk([&](ir::Operation *op) { count += op->code() == ir::OpCode::Barrier; });
  return count;
}

TEST(SharedAllocation, ScratchOfDisjointOpsSharesBytes) {
  auto module = parse(range("%0", 1024) + convert("%1", "%0", 1024) + convert("%2", "%0", 1024));
  SharedAllocation allocation(funcOf(*module));
  expectValid(allocation);
  ASSERT_EQ(allocation.buffers().size(), 2u);
  int64_t bytes = scratchBytes(*allocation.buffers()[0].op);
  EXPECT_GE(bytes, 1024 * 4);
  // Both at 0: no room to keep them apart without growing the total.
  EXPECT_EQ(scratchOffsets(allocation), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(allocation.totalBytes(), bytes);
  allocation.apply();
  EXPECT_EQ(insertBarriers(funcOf(*module)), 1); // the second waits for the first's readers
}

TEST(SharedAllocation, ConsecutiveScratchMovesApartWithinTheTotal) {
  // A large conversion sets the total; the two small ones after it alternate inside it.
  auto module = parse(range("%0", 2048) + range("%1", 1024) + convert("%2", "%0", 2048) +
                      convert("%3", "%1", 1024) + convert("%4", "%1", 1024) +
                      convert("%5", "%1", 1024));
  SharedAllocation allocation(funcOf(*module));
  expectValid(allocation);
  int64_t small = scratchBytes(*allocation.buffers()[1].op);
  EXPECT_EQ(allocation.totalBytes(), scratchBytes(*allocation.buffers()[0].op));
  std::vector<int64_t> offsets = scratchOffsets(allocation);
  ASSERT_EQ(offsets.size(), 4u);
  EXPECT_EQ(offsets[1], 0);               // cannot avoid the large one's bytes
  EXPECT_EQ(offsets[2], (small + 127) / 128 * 128); // moved off the previous one
  EXPECT_EQ(offsets[3], 0);               // and back: only the previous one matters
  allocation.apply();
  EXPECT_EQ(insertBarriers(funcOf(*module)), 1); // large -> first small only
}

TEST(SharedAllocation, TmaStoreScratchStartsOnTheSwizzlePattern) {
  // A TMA store (tmaStoreTile: 64 rows of 128 bytes, the 128-byte swizzle) between two
  // conversions: its scratch on a 1 KiB boundary (the TMA swizzles by absolute address bits),
  // ordered by barriers as any op's scratch: after the first conversion's reads, and before
  // the second one's writes (the issuing thread waited for the TMA's reads: wait_group.read).
  const std::string b2 = "#blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], "
                         "warpsPerCTA = [4, 1], order = [1, 0]}>";
  std::string tile = "tensor<64x64x";
  std::string body = range("%r", 256) + convert("%c", "%r", 256) +
                     "    %p = splat %0 : (ptr<f16>) -> " + tile + "ptr<f16>, " + b2 + ">\n" +
                     "    %v = splat %4 : (f16) -> " + tile + "f16, " + b2 + ">\n" +
                     "    %m = splat %5 : (i1) -> " + tile + "i1, " + b2 + ">\n" +
                     "    store %p, %v, %m, %1, %2, %3 {tma = true} : (" + tile + "ptr<f16>, " +
                     b2 + ">, " + tile + "f16, " + b2 + ">, " + tile + "i1, " + b2 +
                     ">, ptr<i8>, i32, i32) -> ()\n" + convert("%d", "%r", 256);
  auto module = parse(body, "%0: ptr<f16>, %1: ptr<i8>, %2: i32, %3: i32, %4: f16, %5: i1");
  SharedAllocation allocation(funcOf(*module));
  expectValid(allocation);
  ASSERT_EQ(allocation.buffers().size(), 3u);
  const SharedBuffer &store = allocation.buffers()[1];
  EXPECT_EQ(store.op->code(), ir::OpCode::Store);
  EXPECT_EQ(store.bytes, 64 * 128);
  EXPECT_EQ(store.offset % kWgmmaTileAlignment, 0) << allocation.str();
  allocation.apply();
  EXPECT_EQ(insertBarriers(funcOf(*module)), 2);
}

/// A two-slot ring filled by cp.async in a loop, with conversions inside the loop, between the
/// loop and the final wait, and after it.
std::unique_ptr<ir::Module> ringKernel() {
  std::string ring = "tensor<2x1024xi32, #shared>";
  std::string pointers = "tensor<1024xptr<i32>, #blocked>";
  return parse(
      "    %ring = local_alloc : () -> " + ring + "\n" + range("%0", 1024) +
          "    %1 = splat %p : (ptr<i32>) -> " + pointers + "\n" +
          "    %2 = addptr %1, %0 : (" + pointers + ", tensor<1024xi32, #blocked>) -> " + pointers +
          "\n    %zero = constant {value = 0} : () -> i32\n"
          "    %one = constant {value = 1} : () -> i32\n"
          "    async_copy %2, %ring, %zero : (" + pointers + ", " + ring + ", i32) -> ()\n"
          "    async_commit_group : () -> ()\n"
          "    for %zero, %n, %one : (i32, i32, i32) -> () {\n"
          "    ^bb(%i: i32):\n"
          "      async_wait {pending = 0} : () -> ()\n"
          "      async_copy %2, %ring, %one : (" + pointers + ", " + ring + ", i32) -> ()\n"
          "      async_commit_group : () -> ()\n"
          "      %3 = local_load %ring, %zero : (" + ring + ", i32) -> tensor<1024xi32, #blocked>\n" +
          convert("%4", "%3", 1024) +
          "      yield : () -> ()\n"
          "    }\n" +
          convert("%5", "%0", 1024) + // copies may still land: must not touch the ring
          "    async_wait {pending = 0} : () -> ()\n" + convert("%6", "%0", 1024),
      "%p: ptr<i32>, %n: i32");
}

TEST(SharedAllocation, RingLivesOverItsLoopUntilTheCopiesDrain) {
  auto module = ringKernel();
  SharedAllocation allocation(funcOf(*module));
  expectValid(allocation);
  const std::vector<SharedBuffer> &buffers = allocation.buffers();
  ASSERT_EQ(buffers.size(), 4u); // ring, %4, %5, %6
  const SharedBuffer &ring = buffers[0];
  EXPECT_FALSE(ring.isScratch);
  EXPECT_EQ(ring.bytes, 2 * 1024 * 4);
  EXPECT_GE(buffers[1].offset, ring.end()); // in the loop
  EXPECT_GE(buffers[2].offset, ring.end()); // before the last wait
  EXPECT_EQ(buffers[3].offset, 0);          // after it: the ring's bytes are free
  allocation.apply();
  ir::Operation &func = funcOf(*module);
  EXPECT_EQ(func.intAttr("shared_size"), allocation.totalBytes());
  // In the loop: one, before the copy into the slot read last iteration (the conversion in
  // the loop has its own bytes). After the loop: %5 shares %4's bytes (no room beside the
  // ring), %6 overwrites bytes the copies wrote: one each.
  EXPECT_EQ(insertBarriers(func), 3);
  EXPECT_EQ(insertBarriers(func), 0); // idempotent
}

TEST(SharedAllocation, RandomProgramsNeverOverlapLiveBuffers) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::string body = range("%a", 1024) + range("%b", 2048) + range("%c", 256);
    std::uniform_int_distribution<int> pick(0, 2);
    for (int i = 0; i < 12; ++i) {
      int which = pick(random);
      const char *source = which == 0 ? "%a" : which == 1 ? "%b" : "%c";
      body += convert("%r" + std::to_string(i), source, which == 0 ? 1024 : which == 1 ? 2048 : 256);
    }
    auto module = parse(body);
    SharedAllocation allocation(funcOf(*module));
    expectValid(allocation);
    int64_t largest = 0;
    for (const SharedBuffer &buffer : allocation.buffers())
      largest = std::max(largest, buffer.bytes);
    EXPECT_EQ(allocation.totalBytes(), largest); // scratch only: the largest one's bytes
  }
}

TEST(ByteRanges, MergesAndOverlaps) {
  ByteRanges ranges;
  ranges.add({128, 256});
  ranges.add({0, 64});
  ranges.add({256, 512}); // touches: merged
  EXPECT_EQ(ranges.str(), "[0, 64)[128, 512)");
  EXPECT_TRUE(ranges.overlaps({500, 600}));
  EXPECT_FALSE(ranges.overlaps({64, 128}));
  EXPECT_FALSE(ranges.overlaps({600, 600}));
}

TEST(BarrierState, JoinAlignsAsyncGroupsFromTheNewest) {
  BarrierState a, b;
  a.asyncGroups.resize(2);
  a.asyncGroups[0].add({0, 128});
  a.asyncGroups[1].add({128, 256});
  b.asyncGroups.resize(1);
  b.asyncGroups[0].add({256, 384});
  b.reads.add({0, 16});
  BarrierState joined = BarrierState::join(a, b);
  ASSERT_EQ(joined.asyncGroups.size(), 2u);
  EXPECT_EQ(joined.asyncGroups[0].str(), "[0, 128)");
  EXPECT_EQ(joined.asyncGroups[1].str(), "[128, 384)");
  EXPECT_EQ(joined.reads.str(), "[0, 16)");
}

} // namespace
} // namespace tessera::analysis
