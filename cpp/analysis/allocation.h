// Shared-memory allocation: every buffer of a func gets a byte offset in the kernel's one
// dynamic shared-memory region, and buffers whose live ranges do not overlap share bytes.
// The analysis of the `allocate_shared` pass (transforms/allocate_shared.cpp), which runs
// after the pipeliner and before membar and codegen.
//
// Buffers: explicit local_alloc ops (the pipeliner's cp.async rings, staged tiles), live from
// their definition to their last use (a use inside a loop or if that the buffer is defined
// outside of extends it over that whole op; copies into a ring keep it live until the
// async_wait {pending = 0} that drains them), and the scratch each op needs while it runs
// (shared_footprint.h: conversions, reductions and scans across warps, atomics), live at that
// op only. Offsets are 128-byte aligned (swizzled tiles assume it), local_alloc buffers of
// 1 KiB or more 1 KiB aligned (wgmma's descriptors assume it).
#pragma once

#include "ir/ir.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::analysis {

/// Alignment of every buffer's offset, in bytes.
constexpr int64_t kSharedAlignment = 128;
/// Alignment of local_alloc buffers of at least this many bytes (the 128-byte swizzle's period).
constexpr int64_t kWgmmaTileAlignment = 1024;

struct SharedBuffer {
  ir::Operation *op = nullptr; // the local_alloc, or the op whose scratch this is
  bool isScratch = false;
  int64_t bytes = 0;
  /// Live range: positions of ops in program order (pre-order walk of the func), inclusive.
  int64_t firstUse = 0, lastUse = 0;
  int64_t offset = -1;

  int64_t end() const { return offset + bytes; }
  bool liveAtOnce(const SharedBuffer &other) const {
    return firstUse <= other.lastUse && other.firstUse <= lastUse;
  }
  bool overlapsBytes(const SharedBuffer &other) const {
    return offset < other.end() && other.offset < end();
  }
};

/// The allocation of one func. Plan:
/// 1. Number the ops in program order; collect the buffers with their live ranges.
/// 2. First fit, largest buffers first: the lowest 128-byte aligned offset that overlaps no
///    placed buffer live at the same time. The total is the highest end.
/// 3. Within that total, move each op's scratch (in program order) off the bytes of the
///    previous op's scratch where room allows: then the second op need not wait for slow warps
///    still reading the first's (membar finds no write-after-read between them).
class SharedAllocation {
public:
  explicit SharedAllocation(ir::Operation &func);

  const std::vector<SharedBuffer> &buffers() const { return buffers_; }
  /// Bytes of shared memory the func needs (the launch's dynamic shared memory).
  int64_t totalBytes() const { return totalBytes_; }
  /// Records the result in the IR: `offset` on local_alloc ops, `scratch_offset` on ops with
  /// scratch, `shared_size` on the func (the pipeliner's old `shared_reserved` is dropped).
  void apply() const;
  /// One line per buffer, "<op> %<result>: [offset, end) live [first, last]", for tests.
  std::string str() const;

private:
  void collectBuffers(ir::Operation &func);
  void placeFirstFit();
  void separateConsecutiveScratch();

  std::vector<SharedBuffer> buffers_;
  int64_t totalBytes_ = 0;
  ir::Operation *func_;
};

} // namespace tessera::analysis
