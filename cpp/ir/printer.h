// The text form of the tile IR (what IR dumps show and what text tests read).
//
//   module {num_warps = 4} {
//     func @add(%0: ptr<f32>, %1: i32) {divisibility = [16, 0]} {
//       %2 = program_id {axis = 0} : () -> i32
//       %3 = for %a, %b, %c, %init : (i32, i32, i32, f32) -> (f32) {
//       ^bb(%4: i32, %5: f32):
//         yield %5 : (f32) -> ()
//       }
//       return : () -> ()
//     }
//   }
//
// Every op except func prints in one generic form:
//   results = mnemonic operands {attributes} : (operand types) -> (result types) regions
//
// Layout encodings print once, as aliases before `module` (numbered per leading word in order
// of first appearance), and types refer to them by name:
//   #blocked = #blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order =
//   [0]}> module { ... tensor<1024xf32, #blocked> ... }
#pragma once

#include "ir/ir.h"

#include <ostream>
#include <string>

namespace tessera::ir {

struct PrintOptions {
  bool locations = false; // append loc("file:line:col") to ops that carry one
  bool aliases = true;    // encodings as `#blocked1` aliases; false prints them inline
};

void print(const Module &module, std::ostream &os, const PrintOptions &options = {});
std::string toString(const Module &module, const PrintOptions &options = {});
/// Prints one operation (and its regions) with values numbered locally. A lone op has no
/// place for alias definitions, so its encodings always print inline.
std::string toString(const Operation &op, const PrintOptions &options = {});

} // namespace tessera::ir
