// Prints the tile IR in its text form (see printer.h for the grammar by example). With
// aliases, a first printing pass into a discarded stream collects the module's encodings in
// order of appearance; the definitions then print before the module text.
#include "ir/printer.h"

#include <cctype>
#include <map>
#include <sstream>
#include <vector>

namespace tessera::ir {

namespace {

/// Distinct encodings (by text) in order of first use, each with its alias: the text's
/// leading `#word`, with a counter from the second encoding of the same word on.
class AliasTable {
public:
  const std::string &aliasFor(const Encoding &encoding) {
    std::string text = encoding.str();
    auto it = aliases_.find(text);
    if (it != aliases_.end())
      return it->second;
    std::string word = leadingWord(text);
    int &count = wordCounts_[word];
    std::string alias = count ? word + std::to_string(count) : word;
    ++count;
    definitions_.emplace_back(alias, text);
    return aliases_[text] = alias;
  }

  void printDefinitions(std::ostream &os) const {
    for (auto &[alias, text] : definitions_)
      os << alias << " = " << text << "\n";
  }

private:
  static std::string leadingWord(const std::string &text) {
    size_t end = text.empty() || text[0] != '#' ? 0 : 1;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    return end > 1 ? text.substr(0, end) : "#encoding";
  }

  std::map<std::string, std::string> aliases_; // encoding text -> alias
  std::map<std::string, int> wordCounts_;
  std::vector<std::pair<std::string, std::string>> definitions_;
};

class Printer {
public:
  Printer(std::ostream &os, const PrintOptions &options, AliasTable *aliases = nullptr)
      : os_(os), options_(options), aliases_(aliases) {}

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

  /// Type::str, except that encodings print as aliases when there is an alias table.
  std::string typeStr(const Type &type) {
    if (!aliases_)
      return type.str();
    if (type.isPointer()) {
      std::string s = "ptr<" + typeStr(type.pointee());
      if (type.addressSpace() != 1)
        s += ", " + std::to_string(type.addressSpace());
      return s + ">";
    }
    if (!type.isTensor() || !type.encoding())
      return type.str();
    std::string s = type.withEncoding(nullptr).str();
    s.pop_back(); // the closing '>'
    return s + ", " + aliases_->aliasFor(*type.encoding()) + ">";
  }

  std::string attributeText(const Attribute &attr) {
    if (auto *type = std::get_if<Type>(&attr))
      return "!" + typeStr(*type);
    return attributeStr(attr);
  }

  void indent(int depth) {
    for (int i = 0; i < depth; ++i)
      os_ << "  ";
  }

  void printAttributes(const std::map<std::string, Attribute> &attrs, const std::string &skip) {
    bool first = true;
    for (auto &[key, value] : attrs) {
      if (key == skip)
        continue;
      os_ << (first ? " {" : ", ") << key << " = " << attributeText(value);
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
      os_ << (i ? ", " : "") << name(a) << ": " << typeStr(a->type());
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
      os_ << (i ? ", " : "") << typeStr(op.operand(i)->type());
    os_ << ") -> ";
    if (op.numResults() == 1) {
      os_ << typeStr(op.result(0)->type());
    } else {
      os_ << "(";
      for (unsigned i = 0; i < op.numResults(); ++i)
        os_ << (i ? ", " : "") << typeStr(op.result(i)->type());
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
          os_ << (i ? ", " : "") << name(a) << ": " << typeStr(a->type());
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
  AliasTable *aliases_;
  std::map<const Value *, std::string> names_;
  int next_ = 0;
};

} // namespace

void print(const Module &module, std::ostream &os, const PrintOptions &options) {
  if (!options.aliases) {
    Printer(os, options).printModule(module);
    return;
  }
  AliasTable aliases;
  std::ostringstream discarded;
  Printer(discarded, options, &aliases).printModule(module);
  aliases.printDefinitions(os);
  Printer(os, options, &aliases).printModule(module);
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
