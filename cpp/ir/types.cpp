// Tile IR types: storage, structural equality and the text form printed in IR dumps.
#include "ir/types.h"

#include <sstream>
#include <stdexcept>

namespace tessera::ir {

struct TypeStorage {
  Type::Kind kind = Type::Kind::None;
  ScalarKind scalar = ScalarKind::I32;
  int addressSpace = 1;
  std::vector<int64_t> shape;
  Type element; // pointee for pointers, element for tensors
  EncodingPtr encoding;
};

namespace {
struct ScalarInfo {
  ScalarKind kind;
  const char *name;
  int bits;
  bool isFloat;
};
constexpr ScalarInfo kScalars[] = {
    {ScalarKind::I1, "i1", 1, false},
    {ScalarKind::I8, "i8", 8, false},
    {ScalarKind::I16, "i16", 16, false},
    {ScalarKind::I32, "i32", 32, false},
    {ScalarKind::I64, "i64", 64, false},
    {ScalarKind::F16, "f16", 16, true},
    {ScalarKind::BF16, "bf16", 16, true},
    {ScalarKind::F32, "f32", 32, true},
    {ScalarKind::F64, "f64", 64, true},
    {ScalarKind::F8E4M3, "f8e4m3", 8, true},
    {ScalarKind::F8E5M2, "f8e5m2", 8, true},
    {ScalarKind::F8E4M3B15, "f8e4m3b15", 8, true},
    {ScalarKind::F8E4M3FNUZ, "f8e4m3fnuz", 8, true},
    {ScalarKind::F8E5M2FNUZ, "f8e5m2fnuz", 8, true},
};
const ScalarInfo &info(ScalarKind kind) { return kScalars[static_cast<int>(kind)]; }
} // namespace

const char *scalarKindName(ScalarKind kind) { return info(kind).name; }
int scalarBitWidth(ScalarKind kind) { return info(kind).bits; }
bool isFp8Kind(ScalarKind kind) { return info(kind).isFloat && info(kind).bits == 8; }
bool isFloatKind(ScalarKind kind) { return info(kind).isFloat; }
bool parseScalarKind(const std::string &name, ScalarKind &out) {
  for (const auto &s : kScalars)
    if (name == s.name) {
      out = s.kind;
      return true;
    }
  return false;
}

Type Type::scalar(ScalarKind kind) {
  // Scalars are shared: one storage per kind.
  static const std::vector<std::shared_ptr<const TypeStorage>> table = [] {
    std::vector<std::shared_ptr<const TypeStorage>> t;
    for (const auto &s : kScalars) {
      auto st = std::make_shared<TypeStorage>();
      st->kind = Kind::Scalar;
      st->scalar = s.kind;
      t.push_back(st);
    }
    return t;
  }();
  return Type(table[static_cast<int>(kind)]);
}

Type Type::pointer(Type pointee, int addressSpace) {
  if (pointee.isNull() || pointee.isTensor())
    throw std::invalid_argument("pointer pointee must be a scalar or pointer type");
  auto st = std::make_shared<TypeStorage>();
  st->kind = Kind::Pointer;
  st->element = pointee;
  st->addressSpace = addressSpace;
  return Type(st);
}

Type Type::tensor(std::vector<int64_t> shape, Type element, EncodingPtr encoding) {
  if (element.isNull() || element.isTensor())
    throw std::invalid_argument("tensor element must be a scalar or pointer type");
  for (int64_t d : shape)
    if (d <= 0)
      throw std::invalid_argument("tensor dimensions must be positive");
  auto st = std::make_shared<TypeStorage>();
  st->kind = Kind::Tensor;
  st->shape = std::move(shape);
  st->element = element;
  st->encoding = std::move(encoding);
  return Type(st);
}

Type::Kind Type::kind() const { return storage_ ? storage_->kind : Kind::None; }

bool Type::isInteger() const {
  Type e = elementType();
  return e.kind() == Kind::Scalar && !isFloatKind(e.storage_->scalar);
}
bool Type::isFloat() const {
  Type e = elementType();
  return e.kind() == Kind::Scalar && isFloatKind(e.storage_->scalar);
}
Type Type::elementType() const { return isTensor() ? storage_->element : *this; }
ScalarKind Type::scalarKind() const {
  Type e = elementType();
  if (!e.isScalar())
    throw std::logic_error("scalarKind() of non-scalar type " + str());
  return e.storage_->scalar;
}
int Type::bitWidth() const {
  Type e = elementType();
  if (e.isPointer())
    return 64;
  return scalarBitWidth(e.scalarKind());
}
Type Type::pointee() const {
  if (!isPointer())
    throw std::logic_error("pointee() of non-pointer type " + str());
  return storage_->element;
}
int Type::addressSpace() const { return isPointer() ? storage_->addressSpace : 0; }
const std::vector<int64_t> &Type::shape() const {
  static const std::vector<int64_t> empty;
  return isTensor() ? storage_->shape : empty;
}
int64_t Type::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape())
    n *= d;
  return n;
}
const EncodingPtr &Type::encoding() const {
  static const EncodingPtr none;
  return isTensor() ? storage_->encoding : none;
}

Type Type::withElement(Type element) const {
  if (!isTensor())
    return element;
  return tensor(shape(), element, encoding());
}
Type Type::withEncoding(EncodingPtr encoding) const {
  if (!isTensor())
    return *this;
  return tensor(shape(), elementType(), std::move(encoding));
}
Type Type::withShape(std::vector<int64_t> newShape) const {
  return tensor(std::move(newShape), elementType(), encoding());
}

std::string Type::str() const {
  switch (kind()) {
  case Kind::None: return "<null>";
  case Kind::Scalar: return scalarKindName(storage_->scalar);
  case Kind::Pointer: {
    std::string s = "ptr<" + storage_->element.str();
    if (storage_->addressSpace != 1)
      s += ", " + std::to_string(storage_->addressSpace);
    return s + ">";
  }
  case Kind::Tensor: {
    std::ostringstream os;
    os << "tensor<";
    for (int64_t d : storage_->shape)
      os << d << "x";
    os << storage_->element.str();
    if (storage_->encoding)
      os << ", " << storage_->encoding->str();
    os << ">";
    return os.str();
  }
  }
  return "<?>";
}

bool Type::operator==(const Type &other) const {
  if (storage_ == other.storage_)
    return true;
  if (!storage_ || !other.storage_ || storage_->kind != other.storage_->kind)
    return false;
  const TypeStorage &a = *storage_, &b = *other.storage_;
  switch (a.kind) {
  case Kind::None: return true;
  case Kind::Scalar: return a.scalar == b.scalar;
  case Kind::Pointer: return a.addressSpace == b.addressSpace && a.element == b.element;
  case Kind::Tensor:
    if (a.shape != b.shape || a.element != b.element)
      return false;
    if (!a.encoding || !b.encoding)
      return !a.encoding && !b.encoding;
    return a.encoding->equals(*b.encoding);
  }
  return false;
}

} // namespace tessera::ir
