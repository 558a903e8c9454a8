// Builder: creates operations at an insertion point (a block, before an op or at its end).
// The front end (through the Python bindings) and every pass build IR through it.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

class Builder {
public:
  Builder() = default;
  explicit Builder(Block *block, Operation *before = nullptr) : block_(block), before_(before) {}

  void setInsertionPointToEnd(Block *block) { block_ = block, before_ = nullptr; }
  void setInsertionPoint(Operation *before) { block_ = before->parentBlock(), before_ = before; }
  void setInsertionPointAfter(Operation *op);
  Block *insertionBlock() const { return block_; }
  /// Location attached to every op created from now on (file:line:col of the kernel source).
  void setLocation(std::string loc) { location_ = std::move(loc); }

  Operation *create(OpCode code, const std::vector<Value *> &operands,
                    const std::vector<Type> &resultTypes,
                    std::map<std::string, Attribute> attrs = {}, unsigned numRegions = 0);
  /// Moves a detached op into place.
  Operation *insert(std::unique_ptr<Operation> op);

  // Conveniences used by passes.
  Value *constantInt(int64_t value, Type type);
  Value *constantFloat(double value, Type type);

private:
  Block *block_ = nullptr;
  Operation *before_ = nullptr;
  std::string location_;
};

} // namespace tessera::ir
