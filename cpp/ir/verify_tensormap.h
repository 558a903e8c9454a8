// Verifier rules of the device-side tensor-map ops (ops.def: global_scratch, tensormap_create);
// verifier.cpp's rule table calls them.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

/// Checks the contract written beside the op in ops.def (emitError when broken).
void verifyTensorMapOp(const Operation &op);

/// Bytes of an element of PTX `tensormap.replace .elemtype` code `code` (0 for an unknown
/// code): the table PTX's ISA gives, .u8 (0) to .tf32.ftz (12).
int tensorMapElementBytes(int64_t code);

} // namespace tessera::ir
