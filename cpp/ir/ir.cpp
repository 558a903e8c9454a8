// Tile IR data structures: ownership, use lists, cloning and erasure.
#include "ir/ir.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera::ir {

namespace {
struct OpInfo {
  const char *name;
  unsigned traits;
};
using namespace trait;
const OpInfo kOps[] = {
#define OP(name, mnemonic, traits) {mnemonic, traits},
#include "ir/ops.def"
#undef OP
};

void removeUse(Value *v, Operation *user) {
  auto &users = const_cast<std::vector<Operation *> &>(v->users());
  auto it = std::find(users.begin(), users.end(), user);
  if (it != users.end())
    users.erase(it);
}
} // namespace

const std::vector<OpWithoutRule> &opsWithoutRule() {
  using namespace layer;
  static const std::vector<OpWithoutRule> ops = {
#define OP(name, mnemonic, traits)
#define NO_RULE(name, layers, reason) {OpCode::name, layers, reason},
#include "ir/ops.def"
#undef NO_RULE
#undef OP
  };
  return ops;
}

const char *opName(OpCode code) { return kOps[static_cast<int>(code)].name; }
unsigned opTraits(OpCode code) { return kOps[static_cast<int>(code)].traits; }
bool parseOpName(const std::string &name, OpCode &out) {
  for (size_t i = 0; i < sizeof(kOps) / sizeof(kOps[0]); ++i)
    if (name == kOps[i].name) {
      out = static_cast<OpCode>(i);
      return true;
    }
  return false;
}

std::string attributeStr(const Attribute &attr) {
  std::ostringstream os;
  if (auto *b = std::get_if<bool>(&attr)) {
    os << (*b ? "true" : "false");
  } else if (auto *i = std::get_if<int64_t>(&attr)) {
    os << *i;
  } else if (auto *d = std::get_if<double>(&attr)) {
    // Floats always carry a '.', an exponent or a name so the parser tells them from ints;
    // 17 significant digits make the text round-trip exactly.
    if (std::isnan(*d))
      os << "nan";
    else if (std::isinf(*d))
      os << (*d < 0 ? "-inf" : "inf");
    else {
      char buf[64];
      snprintf(buf, sizeof(buf), "%.17g", *d);
      std::string s = buf;
      if (s.find_first_of(".eE") == std::string::npos)
        s += ".0";
      os << s;
    }
  } else if (auto *s = std::get_if<std::string>(&attr)) {
    os << '"';
    for (char c : *s) {
      if (c == '"' || c == '\\')
        os << '\\';
      os << c;
    }
    os << '"';
  } else if (auto *a = std::get_if<std::vector<int64_t>>(&attr)) {
    os << '[';
    for (size_t k = 0; k < a->size(); ++k)
      os << (k ? ", " : "") << (*a)[k];
    os << ']';
  } else if (auto *t = std::get_if<Type>(&attr)) {
    os << '!' << t->str();
  }
  return os.str();
}

// ---------------------------------------------------------------- Value

void Value::replaceAllUsesWith(Value *other) {
  if (other == this)
    return;
  std::vector<Operation *> users = users_;
  for (Operation *user : users)
    for (unsigned i = 0; i < user->numOperands(); ++i)
      if (user->operand(i) == this)
        user->setOperand(i, other);
}

// ---------------------------------------------------------------- Block

Block::~Block() {
  // Drop every use first so that destroying ops in any order never touches a freed value.
  for (auto &op : ops_)
    op->dropAllReferences();
  ops_.clear();
}

Value *Block::addArgument(Type type) {
  args_.push_back(std::unique_ptr<Value>(
      new Value(std::move(type), nullptr, this, static_cast<unsigned>(args_.size()))));
  return args_.back().get();
}

void Block::eraseArgument(unsigned i) {
  if (args_.at(i)->hasUses())
    throw std::logic_error("eraseArgument: argument still has uses");
  args_.erase(args_.begin() + i);
  for (unsigned k = i; k < args_.size(); ++k)
    args_[k]->index_ = k;
}

Operation *Block::terminator() const {
  if (ops_.empty() || !ops_.back()->hasTrait(trait::TERM))
    return nullptr;
  return ops_.back().get();
}

Operation *Block::parentOp() const { return parent_ ? parent_->parentOp() : nullptr; }

Block::OpList::iterator Block::find(Operation *op) {
  return std::find_if(ops_.begin(), ops_.end(), [&](auto &p) { return p.get() == op; });
}

Operation *Block::insert(Operation *before, std::unique_ptr<Operation> op) {
  op->parent_ = this;
  Operation *raw = op.get();
  if (!before)
    ops_.push_back(std::move(op));
  else
    ops_.insert(find(before), std::move(op));
  return raw;
}

std::unique_ptr<Operation> Block::remove(Operation *op) {
  auto it = find(op);
  if (it == ops_.end())
    throw std::logic_error("Block::remove: op not in block");
  std::unique_ptr<Operation> owned = std::move(*it);
  ops_.erase(it);
  owned->parent_ = nullptr;
  return owned;
}

Block *Region::addBlock() {
  blocks_.push_back(std::make_unique<Block>());
  blocks_.back()->parent_ = this;
  return blocks_.back().get();
}

// ---------------------------------------------------------------- Operation

std::unique_ptr<Operation> Operation::create(OpCode code, const std::vector<Value *> &operands,
                                             const std::vector<Type> &resultTypes,
                                             std::map<std::string, Attribute> attrs,
                                             unsigned numRegions) {
  std::unique_ptr<Operation> op(new Operation(code));
  op->setOperands(operands);
  for (const Type &t : resultTypes)
    op->addResult(t);
  op->attrs_ = std::move(attrs);
  for (unsigned i = 0; i < numRegions; ++i)
    op->regions_.push_back(std::make_unique<Region>(op.get()));
  return op;
}

Operation::~Operation() {
  dropAllReferences();
  regions_.clear();
}

void Operation::setOperand(unsigned i, Value *v) {
  if (operands_.at(i))
    removeUse(operands_[i], this);
  operands_[i] = v;
  if (v)
    v->users_.push_back(this);
}

void Operation::setOperands(const std::vector<Value *> &vs) {
  for (Value *v : operands_)
    if (v)
      removeUse(v, this);
  operands_ = vs;
  for (Value *v : operands_) {
    if (!v)
      throw std::invalid_argument(std::string("null operand for op ") + name());
    v->users_.push_back(this);
  }
}

void Operation::eraseOperand(unsigned i) {
  removeUse(operands_.at(i), this);
  operands_.erase(operands_.begin() + i);
}

Value *Operation::addResult(Type type) {
  results_.push_back(std::unique_ptr<Value>(
      new Value(std::move(type), this, nullptr, static_cast<unsigned>(results_.size()))));
  return results_.back().get();
}

void Operation::eraseResult(unsigned i) {
  if (results_.at(i)->hasUses())
    throw std::logic_error("eraseResult: result still has uses");
  results_.erase(results_.begin() + i);
  for (unsigned k = i; k < results_.size(); ++k)
    results_[k]->index_ = k;
}

const Attribute &Operation::attr(const std::string &key) const {
  auto it = attrs_.find(key);
  if (it == attrs_.end())
    throw std::out_of_range(std::string("op '") + name() + "' has no attribute '" + key + "'");
  return it->second;
}
int64_t Operation::intAttr(const std::string &key) const {
  const Attribute &a = attr(key);
  if (auto *b = std::get_if<bool>(&a))
    return *b;
  return std::get<int64_t>(a);
}
bool Operation::hasTrait(unsigned t) const {
  unsigned traits = opTraits(code_);
  if (code_ == OpCode::ExternElementwise && !flagAttr("pure"))
    traits &= ~trait::PURE; // may have side effects: never merged, hoisted or dropped
  return (traits & t) == t;
}
bool Operation::flagAttr(const std::string &key) const {
  if (!hasAttr(key))
    return false;
  const Attribute &a = attr(key);
  if (auto *b = std::get_if<bool>(&a))
    return *b;
  auto *i = std::get_if<int64_t>(&a);
  return i && *i != 0;
}
double Operation::floatAttr(const std::string &key) const {
  const Attribute &a = attr(key);
  if (auto *i = std::get_if<int64_t>(&a))
    return static_cast<double>(*i);
  return std::get<double>(a);
}
const std::string &Operation::stringAttr(const std::string &key) const {
  return std::get<std::string>(attr(key));
}
const std::vector<int64_t> &Operation::arrayAttr(const std::string &key) const {
  return std::get<std::vector<int64_t>>(attr(key));
}

bool Operation::isInside(const Operation *ancestor) const {
  for (const Operation *p = parentOp(); p; p = p->parentOp())
    if (p == ancestor)
      return true;
  return false;
}

void Operation::dropAllReferences() {
  for (Value *v : operands_)
    if (v)
      removeUse(v, this);
  operands_.clear();
  for (auto &region : regions_)
    for (auto &block : region->blocks())
      for (auto &op : block->operations())
        op->dropAllReferences();
}

void Operation::erase() {
  for (auto &r : results_)
    if (r->hasUses())
      throw std::logic_error(std::string("erase: result of '") + name() + "' still has uses");
  dropAllReferences();
  if (parent_)
    parent_->remove(this); // destroys the returned unique_ptr
}

std::unique_ptr<Operation> Operation::clone(std::map<Value *, Value *> &mapping) const {
  std::vector<Value *> ops;
  for (Value *v : operands_) {
    auto it = mapping.find(v);
    ops.push_back(it == mapping.end() ? v : it->second);
  }
  std::vector<Type> types;
  for (auto &r : results_)
    types.push_back(r->type());
  auto copy = create(code_, ops, types, attrs_, 0);
  copy->location_ = location_;
  for (size_t i = 0; i < results_.size(); ++i)
    mapping[results_[i].get()] = copy->result(i);
  for (auto &region : regions_) {
    copy->regions_.push_back(std::make_unique<Region>(copy.get()));
    Region &newRegion = *copy->regions_.back();
    newRegion.blocks().clear();
    for (auto &block : region->blocks()) {
      Block *nb = newRegion.addBlock();
      for (auto &arg : block->arguments())
        mapping[arg.get()] = nb->addArgument(arg->type());
      for (auto &op : block->operations())
        nb->insert(nullptr, op->clone(mapping));
    }
  }
  return copy;
}

// ---------------------------------------------------------------- Module

Module::Module() : body_(std::make_unique<Block>()) {}

int64_t Module::intAttrOr(const std::string &name, int64_t fallback) const {
  auto it = attrs_.find(name);
  if (it == attrs_.end())
    return fallback;
  const int64_t *value = std::get_if<int64_t>(&it->second);
  return value ? *value : fallback;
}

std::vector<Operation *> Module::functions() const {
  std::vector<Operation *> fs;
  for (auto &op : body_->operations())
    if (op->code() == OpCode::Func)
      fs.push_back(op.get());
  return fs;
}

Operation *Module::lookupFunction(const std::string &name) const {
  for (Operation *f : functions())
    if (f->hasAttr("sym_name") && f->stringAttr("sym_name") == name)
      return f;
  return nullptr;
}

std::unique_ptr<Module> Module::clone() const {
  auto m = std::make_unique<Module>();
  m->attrs_ = attrs_;
  std::map<Value *, Value *> mapping;
  for (auto &op : body_->operations())
    m->body_->insert(nullptr, op->clone(mapping));
  return m;
}

} // namespace tessera::ir
