// A tl.make_tensor_descriptor under TESSERA_TMA encodes its map in the kernel
// (tensormap_create into global_scratch, ops.def) so that the pipeliner may copy its loads
// with the TMA. Where no TMA plan took them (dropUnusedTensorMaps turned them back into
// masked loads) writing the map would be wasted work, and a launch would still need the
// allocator: the map and its scratch go.
#include "transforms/pipeline/device_tensor_maps.h"

#include <map>
#include <vector>

namespace tessera::transforms::pipeline {

using namespace ir;

namespace {

constexpr int64_t kMapBytes = 128; // a CUtensorMap, 128-byte aligned (ops.def)

} // namespace

void dropUnusedDeviceTensorMaps(Operation &func) {
  std::vector<Operation *> creates, scratches;
  func.walk([&](Operation *op) {
    if (op->code() == OpCode::TensorMapCreate)
      creates.push_back(op);
    else if (op->code() == OpCode::GlobalScratch)
      scratches.push_back(op);
  });
  for (Operation *create : creates)
    if (!create->result()->hasUses())
      create->erase();
  // The maps kept are packed at the start of each program's part (in their order): the
  // launch allocates only what they use.
  std::map<int64_t, int64_t> packed;
  std::vector<Operation *> kept;
  for (Operation *scratch : scratches) {
    if (!scratch->result()->hasUses()) {
      scratch->erase();
      continue;
    }
    packed.emplace(scratch->intAttr("offset"), 0);
    kept.push_back(scratch);
  }
  if (packed.empty()) {
    func.attributes().erase("global_scratch");
    return;
  }
  int64_t next = 0;
  for (auto &[offset, newOffset] : packed) {
    newOffset = next;
    next += kMapBytes;
  }
  for (Operation *scratch : kept)
    scratch->attributes()["offset"] = packed.at(scratch->intAttr("offset"));
  func.attributes()["global_scratch"] = next;
}

} // namespace tessera::transforms::pipeline
