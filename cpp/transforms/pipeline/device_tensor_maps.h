// The device-side tensor maps no TMA copy uses (see device_tensor_maps.cpp).
#pragma once

#include "ir/ir.h"

namespace tessera::transforms::pipeline {

/// Erases each tensormap_create whose map nothing reads any more (its descriptor's loads
/// were not copied by a TMA pipeline and went back to masked loads), then each
/// global_scratch left unused, and, when none is left, the func's `global_scratch`: such a
/// kernel takes no scratch parameter and needs no allocator, as before TMA was asked for.
void dropUnusedDeviceTensorMaps(ir::Operation &func);

} // namespace tessera::transforms::pipeline
