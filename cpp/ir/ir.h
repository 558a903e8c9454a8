// Tile IR data structures: Value, Operation, Block, Region, Module.
//
// Region-based SSA without MLIR: a Module holds `func` operations; an Operation has an opcode
// from ops.def, operands, results, attributes and regions; a Region holds one Block (structured
// control flow only); a Block has arguments and an ordered list of owned operations.
// Loop-carried values are explicit (for/while block arguments and yield operands).
#pragma once

#include "ir/types.h"

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace tessera::ir {

enum class OpCode : uint16_t {
#define OP(name, mnemonic, traits) name,
#include "ir/ops.def"
#undef OP
};

namespace trait {
constexpr unsigned PURE = 1, READS = 2, WRITES = 4, TERM = 8, REGIONS = 16, COMM = 32,
                   ELEMENTWISE = 64;
}

/// How many ops ops.def declares (OpCode values are 0 .. kNumOpCodes - 1).
constexpr size_t kNumOpCodes = 0
#define OP(name, mnemonic, traits) +1
#include "ir/ops.def"
#undef OP
    ;

/// The layers that hold a rule per op (ops.def's NO_RULE names those an op has none in).
namespace layer {
constexpr unsigned VERIFIER = 1, LOWERING = 2, INTERPRETER = 4;
}

/// An op without a rule of its own in some layers (ops.def's NO_RULE), and why.
struct OpWithoutRule {
  OpCode code;
  unsigned layers;
  const char *reason;
};
const std::vector<OpWithoutRule> &opsWithoutRule();

const char *opName(OpCode code);
unsigned opTraits(OpCode code);
bool parseOpName(const std::string &name, OpCode &out);
inline bool hasTrait(OpCode code, unsigned t) { return (opTraits(code) & t) == t; }

/// Attribute values: bool, integer, float, string, integer array, type.
using Attribute = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, Type>;
std::string attributeStr(const Attribute &attr);

class Operation;
class Block;
class Region;

/// An SSA value: the result of an operation or the argument of a block. Owned by its definer.
class Value {
public:
  Type type() const { return type_; }
  void setType(Type t) { type_ = std::move(t); }
  /// The operation that defines this value (null for block arguments).
  Operation *definingOp() const { return definingOp_; }
  /// The block this value is an argument of (null for op results).
  Block *ownerBlock() const { return ownerBlock_; }
  unsigned index() const { return index_; }
  /// Operations using this value, once per use.
  const std::vector<Operation *> &users() const { return users_; }
  bool hasUses() const { return !users_.empty(); }
  /// Makes every user of this value use `other` instead.
  void replaceAllUsesWith(Value *other);

private:
  friend class Operation;
  friend class Block;
  Value(Type t, Operation *op, Block *block, unsigned index)
      : type_(std::move(t)), definingOp_(op), ownerBlock_(block), index_(index) {}
  Type type_;
  Operation *definingOp_;
  Block *ownerBlock_;
  unsigned index_;
  std::vector<Operation *> users_;
};

class Block {
public:
  using OpList = std::list<std::unique_ptr<Operation>>;
  Block() = default;
  Block(const Block &) = delete;
  ~Block();

  Value *addArgument(Type type);
  /// Removes argument i (it must have no uses).
  void eraseArgument(unsigned i);
  const std::vector<std::unique_ptr<Value>> &arguments() const { return args_; }
  Value *argument(unsigned i) const { return args_.at(i).get(); }
  unsigned numArguments() const { return static_cast<unsigned>(args_.size()); }

  OpList &operations() { return ops_; }
  const OpList &operations() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  Operation *terminator() const;
  Region *parentRegion() const { return parent_; }
  Operation *parentOp() const;

  /// Inserts `op` before `before` (at the end when null); takes ownership.
  Operation *insert(Operation *before, std::unique_ptr<Operation> op);
  /// Detaches `op` from this block and returns ownership.
  std::unique_ptr<Operation> remove(Operation *op);
  OpList::iterator find(Operation *op);

private:
  friend class Region;
  Region *parent_ = nullptr;
  std::vector<std::unique_ptr<Value>> args_;
  OpList ops_;
};

class Region {
public:
  explicit Region(Operation *parent) : parent_(parent) { addBlock(); }
  Block &front() { return *blocks_.front(); }
  const Block &front() const { return *blocks_.front(); }
  std::vector<std::unique_ptr<Block>> &blocks() { return blocks_; }
  Operation *parentOp() const { return parent_; }
  Block *addBlock();

private:
  Operation *parent_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

class Operation {
public:
  /// Creates a detached operation. Insert it into a block with Block::insert or a Builder.
  static std::unique_ptr<Operation> create(OpCode code, const std::vector<Value *> &operands,
                                           const std::vector<Type> &resultTypes,
                                           std::map<std::string, Attribute> attrs = {},
                                           unsigned numRegions = 0);
  Operation(const Operation &) = delete;
  ~Operation();

  OpCode code() const { return code_; }
  const char *name() const { return opName(code_); }
  /// The op's traits (ops.def), except that an extern_elementwise call declared impure
  /// (pure = false) is not PURE.
  bool hasTrait(unsigned t) const;

  const std::vector<Value *> &operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_.at(i); }
  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  void setOperand(unsigned i, Value *v);
  void setOperands(const std::vector<Value *> &vs);
  void eraseOperand(unsigned i);

  const std::vector<std::unique_ptr<Value>> &results() const { return results_; }
  Value *result(unsigned i = 0) const { return results_.at(i).get(); }
  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }
  /// Appends a result (used when a pass grows a loop's carried values).
  Value *addResult(Type type);
  /// Removes result i (it must have no uses).
  void eraseResult(unsigned i);

  std::map<std::string, Attribute> &attributes() { return attrs_; }
  const std::map<std::string, Attribute> &attributes() const { return attrs_; }
  bool hasAttr(const std::string &key) const { return attrs_.count(key) != 0; }
  const Attribute &attr(const std::string &key) const;
  int64_t intAttr(const std::string &key) const;
  /// Whether the attribute is set to true (a bool, or a nonzero integer); false when absent.
  bool flagAttr(const std::string &key) const;
  double floatAttr(const std::string &key) const;
  const std::string &stringAttr(const std::string &key) const;
  const std::vector<int64_t> &arrayAttr(const std::string &key) const;
  void setAttr(const std::string &key, Attribute value) { attrs_[key] = std::move(value); }

  std::vector<std::unique_ptr<Region>> &regions() { return regions_; }
  const std::vector<std::unique_ptr<Region>> &regions() const { return regions_; }
  Region &region(unsigned i) { return *regions_.at(i); }
  Block &body(unsigned i = 0) { return regions_.at(i)->front(); }
  unsigned numRegions() const { return static_cast<unsigned>(regions_.size()); }

  Block *parentBlock() const { return parent_; }
  Operation *parentOp() const { return parent_ ? parent_->parentOp() : nullptr; }
  /// Is this op (transitively) nested inside `ancestor`?
  bool isInside(const Operation *ancestor) const;

  /// Unlinks from the parent block and destroys (operands dropped first; results must be unused).
  void erase();
  /// Drops the operand uses of this op and of every op nested in its regions.
  void dropAllReferences();
  /// Deep copy; `mapping` maps old values to new ones (filled in for results and block args).
  std::unique_ptr<Operation> clone(std::map<Value *, Value *> &mapping) const;

  /// Source location "file:line:col" kept for error messages (may be empty).
  const std::string &location() const { return location_; }
  void setLocation(std::string loc) { location_ = std::move(loc); }

  /// Calls fn on this op and every nested op, pre-order.
  template <typename Fn> void walk(Fn &&fn) {
    fn(this);
    for (auto &region : regions_)
      for (auto &block : region->blocks())
        for (auto it = block->operations().begin(); it != block->operations().end();) {
          Operation *op = (it++)->get(); // advance first: fn may erase nested ops later
          op->walk(fn);
        }
  }

private:
  friend class Block;
  Operation(OpCode code) : code_(code) {}
  OpCode code_;
  std::vector<Value *> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  std::map<std::string, Attribute> attrs_;
  std::vector<std::unique_ptr<Region>> regions_;
  Block *parent_ = nullptr;
  std::string location_;
};

/// A translation unit: kernels (`func` ops) plus module attributes (num_warps, target, ...).
class Module {
public:
  Module();
  Block &body() { return *body_; }
  const Block &body() const { return *body_; }
  std::map<std::string, Attribute> &attributes() { return attrs_; }
  const std::map<std::string, Attribute> &attributes() const { return attrs_; }
  /// The integer attribute `name`, or `fallback` when the module has none (or not an integer).
  int64_t intAttrOr(const std::string &name, int64_t fallback) const;
  std::vector<Operation *> functions() const;
  Operation *lookupFunction(const std::string &name) const;
  template <typename Fn> void walk(Fn &&fn) {
    for (auto it = body_->operations().begin(); it != body_->operations().end();) {
      Operation *op = (it++)->get();
      op->walk(fn);
    }
  }
  std::unique_ptr<Module> clone() const;
  std::string str() const;

private:
  std::unique_ptr<Block> body_;
  std::map<std::string, Attribute> attrs_;
};

} // namespace tessera::ir
