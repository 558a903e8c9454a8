// Parses the tile IR's text form (see printer.h) back into a Module: a recursive-descent
// reader over characters with scoped SSA names. It is the entry of tessera-opt and of
// ir.parse_module; it only builds IR (the caller verifies). `//` comments are skipped, so lit
// test files with RUN and CHECK lines parse as they are. Encoding alias definitions
// (`#blocked = #blocked<{...}>`) may precede the module; types then name them or spell the
// encoding inline.
#include "ir/parser.h"

#include "ir/diagnostics.h"
#include "layout/encoding.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <unordered_map>

namespace tessera::ir {

namespace {

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}

class Parser {
public:
  Parser(const std::string &text, const ParserOptions &options) : text_(text), options_(options) {
    lineStarts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n')
        lineStarts_.push_back(i + 1);
  }

  std::unique_ptr<Module> parseModule() {
    auto module = std::make_unique<Module>();
    scopes_.emplace_back();
    for (skipTrivia(); peek() == '#'; skipTrivia())
      parseAliasDefinition();
    if (consumeKeyword("module")) {
      if (atAttributeDict())
        module->attributes() = parseAttributeDict();
      expect("{");
      parseOpsUntilBrace(module->body());
      expect("}");
    } else {
      // A bare list of funcs is accepted as the body of an implicit module.
      while (!atEnd())
        parseOp(module->body());
    }
    skipTrivia();
    if (!atEnd())
      fail("expected end of input");
    return module;
  }

private:
  // ------------------------------------------------------------------ characters

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void skipTrivia() {
    while (!atEnd()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        ++pos_;
      } else if (text_.compare(pos_, 2, "//") == 0) {
        while (!atEnd() && text_[pos_] != '\n')
          ++pos_;
      } else {
        break;
      }
    }
  }

  /// Consumes `literal` (after whitespace) if it comes next.
  bool consume(const char *literal) {
    skipTrivia();
    size_t n = std::char_traits<char>::length(literal);
    if (text_.compare(pos_, n, literal) != 0)
      return false;
    pos_ += n;
    return true;
  }

  /// Like consume, but `word` must not run on into a longer name.
  bool consumeKeyword(const char *word) {
    skipTrivia();
    size_t n = std::char_traits<char>::length(word);
    if (text_.compare(pos_, n, word) != 0 || isNameChar(peek(n)))
      return false;
    pos_ += n;
    return true;
  }

  void expect(const char *literal) {
    if (!consume(literal))
      fail(std::string("expected '") + literal + "'");
  }

  std::string position(size_t offset) const {
    size_t line =
        std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset) - lineStarts_.begin();
    size_t column = offset - lineStarts_[line - 1] + 1;
    std::string lineCol = std::to_string(line) + ":" + std::to_string(column);
    return options_.fileName.empty() ? lineCol : options_.fileName + ":" + lineCol;
  }

  [[noreturn]] void fail(const std::string &message) { fail(message, pos_); }
  [[noreturn]] void fail(const std::string &message, size_t offset) {
    std::string found =
        offset >= text_.size() ? "end of input" : "'" + std::string(1, text_[offset]) + "'";
    if (offset == pos_ && message.rfind("expected", 0) == 0)
      throw CompileError(message + ", found " + found, position(offset));
    throw CompileError(message, position(offset));
  }

  std::string parseName(const char *what) {
    skipTrivia();
    size_t start = pos_;
    while (!atEnd() && isNameChar(text_[pos_]))
      ++pos_;
    if (start == pos_)
      fail(std::string("expected ") + what);
    return text_.substr(start, pos_ - start);
  }

  void skipDigits() {
    while (std::isdigit(static_cast<unsigned char>(peek())))
      ++pos_;
  }

  int64_t parseInteger() {
    skipTrivia();
    size_t start = pos_;
    if (peek() == '-')
      ++pos_;
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      fail("expected an integer", start);
    skipDigits();
    errno = 0;
    long long value = std::strtoll(text_.c_str() + start, nullptr, 10);
    if (errno == ERANGE)
      fail("integer out of range", start);
    return value;
  }

  std::string parseString() {
    skipTrivia();
    size_t start = pos_;
    if (peek() != '"')
      fail("expected a string");
    ++pos_;
    std::string out;
    while (!atEnd() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size())
        ++pos_; // the printer escapes only '"' and '\': take the next char as it is
      out += text_[pos_++];
    }
    if (atEnd())
      fail("unterminated string", start);
    ++pos_;
    return out;
  }

  // ------------------------------------------------------------------ types

  Type parseType() {
    skipTrivia();
    size_t start = pos_;
    try {
      if (consumeKeyword("ptr")) {
        expect("<");
        Type pointee = parseType();
        int64_t addressSpace = consume(",") ? parseInteger() : 1;
        expect(">");
        return Type::pointer(pointee, static_cast<int>(addressSpace));
      }
      if (consumeKeyword("tensor"))
        return parseTensorBody(start);
    } catch (const std::invalid_argument &error) {
      fail(std::string("invalid type: ") + error.what(), start);
    }
    std::string name = parseName("a type");
    ScalarKind kind;
    if (!parseScalarKind(name, kind))
      fail("expected a type, found '" + name + "'", start);
    return Type::scalar(kind);
  }

  /// `<AxBxT[, #encoding]>` after the word `tensor`.
  Type parseTensorBody(size_t start) {
    expect("<");
    std::vector<int64_t> shape;
    skipTrivia();
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      shape.push_back(parseInteger());
      if (peek() != 'x')
        fail("expected 'x' after a tensor dimension");
      ++pos_;
    }
    Type element = parseType();
    EncodingPtr encoding;
    if (consume(","))
      encoding = parseEncodingText();
    expect(">");
    if (element.isTensor())
      fail("tensor element must be a scalar or pointer type", start);
    return Type::tensor(shape, element, encoding);
  }

  /// `#name = encoding`, the encoding running through its balanced `<...>`.
  void parseAliasDefinition() {
    size_t namePos = pos_;
    ++pos_; // '#'
    std::string name = "#" + parseName("an alias name after '#'");
    if (aliases_.count(name))
      fail("redefinition of encoding alias '" + name + "'", namePos);
    expect("=");
    skipTrivia();
    size_t start = pos_;
    while (!atEnd() && text_[pos_] != '<' && text_[pos_] != '\n')
      ++pos_;
    int depth = 0;
    do {
      if (atEnd())
        fail("unterminated encoding in alias '" + name + "'", start);
      depth += text_[pos_] == '<' ? 1 : text_[pos_] == '>' ? -1 : 0;
      ++pos_;
    } while (depth > 0);
    aliases_[name] = parseEncodingFrom(text_.substr(start, pos_ - start), start);
  }

  /// An alias name, or the inline encoding text running to the '>' that closes the tensor
  /// type (balanced on < >).
  EncodingPtr parseEncodingText() {
    skipTrivia();
    size_t start = pos_;
    if (peek() == '#') {
      size_t end = pos_ + 1;
      while (end < text_.size() && isNameChar(text_[end]))
        ++end;
      std::string name = text_.substr(pos_, end - pos_);
      size_t after = end;
      while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after])))
        ++after;
      if (after < text_.size() && text_[after] != '<') {
        auto it = aliases_.find(name);
        if (it == aliases_.end())
          fail("undefined encoding alias '" + name + "'", start);
        pos_ = end;
        return it->second;
      }
    }
    int depth = 0;
    while (!atEnd() && !(text_[pos_] == '>' && depth == 0)) {
      depth += text_[pos_] == '<' ? 1 : text_[pos_] == '>' ? -1 : 0;
      ++pos_;
    }
    return parseEncodingFrom(text_.substr(start, pos_ - start), start);
  }

  EncodingPtr parseEncodingFrom(const std::string &encodingText, size_t start) {
    try {
      return tessera::parseEncoding(encodingText);
    } catch (const std::exception &error) {
      fail(std::string("invalid encoding: ") + error.what(), start);
    }
  }

  std::vector<Type> parseTypeList() {
    std::vector<Type> types;
    expect("(");
    if (consume(")"))
      return types;
    do
      types.push_back(parseType());
    while (consume(","));
    expect(")");
    return types;
  }

  // ------------------------------------------------------------------ attributes

  /// `{` followed by `key =` (or an empty `{}` before another `{`): an attribute dictionary
  /// rather than the body that follows module and func headers.
  bool atAttributeDict() {
    size_t saved = pos_;
    bool result = false;
    if (consume("{")) {
      if (consume("}")) {
        result = consume("{");
      } else {
        skipTrivia();
        size_t nameStart = pos_;
        while (!atEnd() && isNameChar(text_[pos_]))
          ++pos_;
        result = pos_ > nameStart && consume("=");
      }
    }
    pos_ = saved;
    return result;
  }

  std::map<std::string, Attribute> parseAttributeDict() {
    std::map<std::string, Attribute> attrs;
    expect("{");
    if (consume("}"))
      return attrs;
    do {
      skipTrivia();
      size_t keyPos = pos_;
      std::string key = parseName("an attribute name");
      if (attrs.count(key))
        fail("duplicate attribute '" + key + "'", keyPos);
      expect("=");
      attrs[key] = parseAttributeValue();
    } while (consume(","));
    expect("}");
    return attrs;
  }

  Attribute parseAttributeValue() {
    skipTrivia();
    if (consumeKeyword("true"))
      return true;
    if (consumeKeyword("false"))
      return false;
    if (peek() == '"')
      return parseString();
    if (consume("!"))
      return parseType();
    if (consume("[")) {
      std::vector<int64_t> values;
      if (consume("]"))
        return values;
      do
        values.push_back(parseInteger());
      while (consume(","));
      expect("]");
      return values;
    }
    return parseNumber();
  }

  /// An integer, or a float when it has a '.', an exponent, or is inf/nan.
  Attribute parseNumber() {
    size_t start = pos_;
    bool negative = peek() == '-';
    if (negative || peek() == '+')
      ++pos_;
    if (consumeKeyword("inf"))
      return negative ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    if (consumeKeyword("nan"))
      return std::numeric_limits<double>::quiet_NaN();
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      fail("expected an attribute value", start);
    bool isFloat = false;
    skipDigits();
    if (peek() == '.') {
      isFloat = true;
      ++pos_;
      skipDigits();
    }
    if (peek() == 'e' || peek() == 'E') {
      isFloat = true;
      ++pos_;
      if (peek() == '-' || peek() == '+')
        ++pos_;
      skipDigits();
    }
    std::string token = text_.substr(start, pos_ - start);
    char *end = nullptr;
    errno = 0;
    if (isFloat) {
      double value = std::strtod(token.c_str(), &end);
      if (*end != '\0')
        fail("malformed number '" + token + "'", start);
      return value;
    }
    long long value = std::strtoll(token.c_str(), &end, 10);
    if (errno == ERANGE)
      fail("integer out of range", start);
    return static_cast<int64_t>(value);
  }

  // ------------------------------------------------------------------ values

  Value *lookup(const std::string &name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->find(name);
      if (it != scope->end())
        return it->second;
    }
    return nullptr;
  }

  void define(const std::string &name, size_t offset, Value *value) {
    if (lookup(name))
      fail("redefinition of value '" + name + "'", offset);
    scopes_.back()[name] = value;
  }

  std::string parseValueName() {
    skipTrivia();
    if (peek() != '%')
      fail("expected a value name ('%...')");
    ++pos_;
    return "%" + parseName("a value name after '%'");
  }

  /// `(%a: type, ...)`: defines each name as an argument of `block`.
  void parseBlockArguments(Block &block) {
    expect("(");
    if (consume(")"))
      return;
    do {
      skipTrivia();
      size_t namePos = pos_;
      std::string name = parseValueName();
      expect(":");
      define(name, namePos, block.addArgument(parseType()));
    } while (consume(","));
    expect(")");
  }

  // ------------------------------------------------------------------ ops

  void parseOpsUntilBrace(Block &block) {
    while (true) {
      skipTrivia();
      if (atEnd() || peek() == '}')
        return;
      parseOp(block);
    }
  }

  void parseOp(Block &block) {
    skipTrivia();
    size_t start = pos_;
    std::vector<std::pair<std::string, size_t>> resultNames;
    if (peek() == '%') {
      do {
        skipTrivia();
        size_t namePos = pos_;
        resultNames.emplace_back(parseValueName(), namePos);
      } while (consume(","));
      expect("=");
    }
    skipTrivia();
    size_t mnemonicPos = pos_;
    std::string mnemonic = parseName("an op name");
    if (mnemonic == "func" && resultNames.empty() && consume("@")) {
      parseFunc(block, start);
      return;
    }
    OpCode code;
    if (!parseOpName(mnemonic, code))
      fail("unknown op '" + mnemonic + "'", mnemonicPos);

    std::vector<std::pair<Value *, size_t>> operands;
    skipTrivia();
    if (peek() == '%') {
      do {
        skipTrivia();
        size_t usePos = pos_;
        std::string name = parseValueName();
        Value *value = lookup(name);
        if (!value)
          fail("use of undefined value '" + name + "'", usePos);
        operands.emplace_back(value, usePos);
      } while (consume(","));
    }
    std::map<std::string, Attribute> attrs;
    skipTrivia();
    if (peek() == '{')
      attrs = parseAttributeDict();
    expect(":");
    skipTrivia();
    size_t typesPos = pos_;
    std::vector<Type> operandTypes = parseTypeList();
    checkOperandTypes(operands, operandTypes, typesPos);
    expect("->");
    skipTrivia();
    size_t resultTypesPos = pos_;
    std::vector<Type> resultTypes = peek() == '(' ? parseTypeList() : std::vector{parseType()};
    if (resultTypes.size() != resultNames.size())
      fail("op '" + mnemonic + "' declares " + std::to_string(resultTypes.size()) +
               " result types for " + std::to_string(resultNames.size()) + " result names",
           resultTypesPos);

    std::vector<Value *> operandValues;
    for (auto &[value, usePos] : operands)
      operandValues.push_back(value);
    Operation *op = block.insert(
        nullptr, Operation::create(code, operandValues, resultTypes, std::move(attrs), 0));
    for (skipTrivia(); peek() == '{'; skipTrivia())
      parseRegion(*op);
    parseLocation(*op, start);
    // Results become visible only now: an op's regions cannot use its own results.
    for (size_t i = 0; i < resultNames.size(); ++i)
      define(resultNames[i].first, resultNames[i].second, op->result(i));
  }

  void checkOperandTypes(const std::vector<std::pair<Value *, size_t>> &operands,
                         const std::vector<Type> &types, size_t typesPos) {
    if (types.size() != operands.size())
      fail(std::to_string(operands.size()) + " operands but " + std::to_string(types.size()) +
               " operand types",
           typesPos);
    for (size_t i = 0; i < types.size(); ++i)
      if (operands[i].first->type() != types[i])
        fail("type mismatch: operand " + std::to_string(i) + " has type " +
                 operands[i].first->type().str() + " but " + types[i].str() + " is declared",
             operands[i].second);
  }

  /// `{ [^bb(%x: type, ...):] ops }`, appended to op's regions.
  void parseRegion(Operation &op) {
    expect("{");
    op.regions().push_back(std::make_unique<Region>(&op));
    Block &block = op.regions().back()->front();
    scopes_.emplace_back();
    if (consume("^")) {
      parseName("a block name");
      parseBlockArguments(block);
      expect(":");
    }
    parseOpsUntilBrace(block);
    expect("}");
    scopes_.pop_back();
  }

  /// `loc("file:line:col")`, or the op's own text position when asked to locate ops.
  void parseLocation(Operation &op, size_t start) {
    if (consumeKeyword("loc")) {
      expect("(");
      op.setLocation(parseString());
      expect(")");
    } else if (options_.locateOps) {
      op.setLocation(position(start));
    }
  }

  /// `func @name(%a: type, ...) {attrs} { ops }` after the '@'.
  void parseFunc(Block &block, size_t start) {
    skipTrivia();
    size_t namePos = pos_;
    std::string name = parseName("a function name after '@'");
    if (!functionNames_.insert(name).second)
      fail("redefinition of function '@" + name + "'", namePos);
    Operation *func =
        block.insert(nullptr, Operation::create(OpCode::Func, {}, {}, {{"sym_name", name}}, 1));
    scopes_.emplace_back(); // function arguments and body share one scope
    parseBlockArguments(func->body());
    if (atAttributeDict()) {
      skipTrivia();
      size_t attrPos = pos_;
      for (auto &[key, value] : parseAttributeDict()) {
        if (key == "sym_name")
          fail("sym_name is given by '@name'", attrPos);
        func->setAttr(key, value);
      }
    }
    expect("{");
    parseOpsUntilBrace(func->body());
    expect("}");
    scopes_.pop_back();
    parseLocation(*func, start);
  }

  const std::string &text_;
  const ParserOptions &options_;
  std::vector<size_t> lineStarts_;
  size_t pos_ = 0;
  std::vector<std::unordered_map<std::string, Value *>> scopes_;
  std::set<std::string> functionNames_;
  std::unordered_map<std::string, EncodingPtr> aliases_;
};

} // namespace

std::unique_ptr<Module> parseModuleWithOptions(const std::string &text,
                                               const ParserOptions &options) {
  return Parser(text, options).parseModule();
}

std::unique_ptr<Module> parseModule(const std::string &text) {
  return parseModuleWithOptions(text, ParserOptions());
}

} // namespace tessera::ir
