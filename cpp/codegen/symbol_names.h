// PTX names for kernels: PTX identifiers allow only [A-Za-z0-9_$], while a Python function may
// be named with any Unicode letters (`def k_é(...)`). Used where the LLVM function is created.
#pragma once

#include <string>

namespace tessera::codegen {

/// `name` itself when it is a valid PTX identifier; otherwise a deterministic, injective
/// spelling: `__tessera_u` followed by the name with every byte outside [A-Za-z0-9] written as
/// `_XX` (two hex digits of its UTF-8 byte), e.g. "k_é" -> "__tessera_uk_5f_c3_a9".
std::string ptxSymbolName(const std::string &name);

} // namespace tessera::codegen
