// PTX names for kernels (see symbol_names.h): LLVM's NVPTX backend aborts the process on a
// symbol it cannot print, so names are made printable before they reach it.
#include "codegen/symbol_names.h"

namespace tessera::codegen {

namespace {

bool isAlnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool isPtxIdentifier(const std::string &name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (unsigned char c : name)
    if (!isAlnum(c) && c != '_')
      return false;
  // Names of our own escapes stay escaped, so two Python names never share a PTX name.
  return name.rfind("__tessera_u", 0) != 0;
}

} // namespace

std::string ptxSymbolName(const std::string &name) {
  if (isPtxIdentifier(name))
    return name;
  static const char *const kHex = "0123456789abcdef";
  std::string out = "__tessera_u";
  for (unsigned char c : name) {
    if (isAlnum(c)) {
      out += static_cast<char>(c);
    } else {
      out += '_';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

} // namespace tessera::codegen
