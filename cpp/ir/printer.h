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
#pragma once

#include "ir/ir.h"

#include <ostream>
#include <string>

namespace tessera::ir {

struct PrintOptions {
  bool locations = false; // append loc("file:line:col") to ops that carry one
};

void print(const Module &module, std::ostream &os, const PrintOptions &options = {});
std::string toString(const Module &module, const PrintOptions &options = {});
/// Prints one operation (and its regions) with values numbered locally.
std::string toString(const Operation &op, const PrintOptions &options = {});

} // namespace tessera::ir
