// Prints the tile IR in its text form (see printer.h for the grammar by example).
#include "ir/printer.h"

#include <map>
#include <sstream>

namespace tessera::ir {

namespace {

class Printer {
public:
  Printer(std::ostream &os, const PrintOptions &options) : os_(os), options_(options) {}

  void printModule(const Module &module) {
    os_ << "module";
    printAttributes(module.attributes(), {});
    os_ << " {\n";
    for (auto &op : module.body().operations())
      printOp(*op, 1);
    os_ << "}\n";
  }

  void printOp(const Operation &op, int depth) {
    indent(depth);
    if (op.code() == OpCode::Func)
      printFunc(op, depth);
    else
      printGeneric(op, depth);
    os_ << "\n";
  }

private:
  std::string name(const Value *v) {
    auto it = names_.find(v);
    if (it != names_.end())
      return it->second;
    return names_[v] = "%" + std::to_string(next_++);
  }

  void indent(int depth) {
    for (int i = 0; i < depth; ++i)
      os_ << "  ";
  }

  void printAttributes(const std::map<std::string, Attribute> &attrs,
                       const std::string &skip) {
    bool first = true;
    for (auto &[key, value] : attrs) {
      if (key == skip)
        continue;
      os_ << (first ? " {" : ", ") << key << " = " << attributeStr(value);
      first = false;
    }
    if (!first)
      os_ << "}";
  }

  void printFunc(const Operation &op, int depth) {
    const Block &body = op.regions()[0]->front();
    os_ << "func @" << (op.hasAttr("sym_name") ? op.stringAttr("sym_name") : "?") << "(";
    for (unsigned i = 0; i < body.numArguments(); ++i) {
      const Value *a = body.argument(i);
      os_ << (i ? ", " : "") << name(a) << ": " << a->type().str();
    }
    os_ << ")";
    printAttributes(op.attributes(), "sym_name");
    os_ << " {\n";
    for (auto &inner : body.operations())
      printOp(*inner, depth + 1);
    indent(depth);
    os_ << "}";
  }

  void printGeneric(const Operation &op, int depth) {
    for (unsigned i = 0; i < op.numResults(); ++i)
      os_ << (i ? ", " : "") << name(op.result(i));
    if (op.numResults())
      os_ << " = ";
    os_ << op.name();
    for (unsigned i = 0; i < op.numOperands(); ++i)
      os_ << (i ? ", " : " ") << name(op.operand(i));
    printAttributes(op.attributes(), "");
    os_ << " : (";
    for (unsigned i = 0; i < op.numOperands(); ++i)
      os_ << (i ? ", " : "") << op.operand(i)->type().str();
    os_ << ") -> ";
    if (op.numResults() == 1) {
      os_ << op.result(0)->type().str();
    } else {
      os_ << "(";
      for (unsigned i = 0; i < op.numResults(); ++i)
        os_ << (i ? ", " : "") << op.result(i)->type().str();
      os_ << ")";
    }
    for (auto &region : op.regions()) {
      os_ << " {\n";
      const Block &block = region->front();
      if (block.numArguments()) {
        indent(depth);
        os_ << "^bb(";
        for (unsigned i = 0; i < block.numArguments(); ++i) {
          const Value *a = block.argument(i);
          os_ << (i ? ", " : "") << name(a) << ": " << a->type().str();
        }
        os_ << "):\n";
      }
      for (auto &inner : block.operations())
        printOp(*inner, depth + 1);
      indent(depth);
      os_ << "}";
    }
    if (options_.locations && !op.location().empty())
      os_ << " loc(\"" << op.location() << "\")";
  }

  std::ostream &os_;
  const PrintOptions &options_;
  std::map<const Value *, std::string> names_;
  int next_ = 0;
};

} // namespace

void print(const Module &module, std::ostream &os, const PrintOptions &options) {
  Printer(os, options).printModule(module);
}

std::string toString(const Module &module, const PrintOptions &options) {
  std::ostringstream os;
  print(module, os, options);
  return os.str();
}

std::string toString(const Operation &op, const PrintOptions &options) {
  std::ostringstream os;
  Printer(os, options).printOp(op, 0);
  return os.str();
}

} // namespace tessera::ir
