// Tile IR types: scalars, pointers and tensors (tensors of scalars or pointers, with an
// optional layout encoding). Types are immutable, cheap-to-copy handles compared by structure.
#pragma once

#include "layout/encoding.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::ir {

// The fp8 kinds: F8E4M3 = e4m3fn (Triton's fp8e4nv), F8E5M2 = e5m2 (fp8e5), F8E4M3B15 = e4m3 with
// exponent bias 15 and no NaN/inf (fp8e4b15), F8E4M3FNUZ / F8E5M2FNUZ = fp8e4b8 / fp8e5b16.
enum class ScalarKind : uint8_t {
  I1,
  I8,
  I16,
  I32,
  I64,
  F16,
  BF16,
  F32,
  F64,
  F8E4M3,
  F8E5M2,
  F8E4M3B15,
  F8E4M3FNUZ,
  F8E5M2FNUZ
};

/// True for the 8-bit float kinds (held as their raw bits in registers and memory).
bool isFp8Kind(ScalarKind kind);

struct TypeStorage;

class Type {
public:
  enum class Kind : uint8_t { None, Scalar, Pointer, Tensor };

  Type() = default;
  static Type scalar(ScalarKind kind);
  static Type pointer(Type pointee, int addressSpace = 1);
  static Type tensor(std::vector<int64_t> shape, Type element, EncodingPtr encoding = nullptr);
  static Type i1() { return scalar(ScalarKind::I1); }
  static Type i32() { return scalar(ScalarKind::I32); }
  static Type i64() { return scalar(ScalarKind::I64); }
  static Type f32() { return scalar(ScalarKind::F32); }

  Kind kind() const;
  bool isNull() const { return !storage_; }
  bool isScalar() const { return kind() == Kind::Scalar; }
  bool isPointer() const { return kind() == Kind::Pointer; }
  bool isTensor() const { return kind() == Kind::Tensor; }
  /// Integer (including i1) / floating scalar, or a tensor of them.
  bool isInteger() const;
  bool isFloat() const;
  /// For a tensor, the element type; otherwise the type itself.
  Type elementType() const;
  /// Scalar kind of a scalar (or of a tensor's scalar element).
  ScalarKind scalarKind() const;
  /// Bits of a scalar, 64 for pointers (of the element, for tensors).
  int bitWidth() const;
  Type pointee() const;
  int addressSpace() const;
  const std::vector<int64_t> &shape() const;
  int64_t numElements() const;
  int rank() const { return isTensor() ? static_cast<int>(shape().size()) : 0; }
  const EncodingPtr &encoding() const;

  /// Same shape, other element type (keeps the encoding); for a scalar, just `element`.
  Type withElement(Type element) const;
  Type withEncoding(EncodingPtr encoding) const;
  Type withShape(std::vector<int64_t> shape) const;

  std::string str() const;
  bool operator==(const Type &other) const;
  bool operator!=(const Type &other) const { return !(*this == other); }

private:
  explicit Type(std::shared_ptr<const TypeStorage> s) : storage_(std::move(s)) {}
  std::shared_ptr<const TypeStorage> storage_;
};

const char *scalarKindName(ScalarKind kind);
bool parseScalarKind(const std::string &name, ScalarKind &out);
int scalarBitWidth(ScalarKind kind);
bool isFloatKind(ScalarKind kind);

} // namespace tessera::ir
