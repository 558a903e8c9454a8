// Builder: creates operations at an insertion point.
#include "ir/builder.h"

#include <stdexcept>

namespace tessera::ir {

void Builder::setInsertionPointAfter(Operation *op) {
  block_ = op->parentBlock();
  auto it = block_->find(op);
  ++it;
  before_ = it == block_->operations().end() ? nullptr : it->get();
}

Operation *Builder::create(OpCode code, const std::vector<Value *> &operands,
                           const std::vector<Type> &resultTypes,
                           std::map<std::string, Attribute> attrs, unsigned numRegions) {
  auto op = Operation::create(code, operands, resultTypes, std::move(attrs), numRegions);
  if (!location_.empty())
    op->setLocation(location_);
  return insert(std::move(op));
}

Operation *Builder::insert(std::unique_ptr<Operation> op) {
  if (!block_)
    throw std::logic_error("Builder has no insertion point");
  return block_->insert(before_, std::move(op));
}

Value *Builder::constantInt(int64_t value, Type type) {
  return create(OpCode::Constant, {}, {type}, {{"value", value}})->result();
}

Value *Builder::constantFloat(double value, Type type) {
  return create(OpCode::Constant, {}, {type}, {{"value", value}})->result();
}

} // namespace tessera::ir
