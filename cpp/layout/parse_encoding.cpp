// parseEncoding: reads the text form of an encoding back (the inverse of Encoding::str()).
//
// Used by the IR parser for tensor types such as tensor<1024xf32, #blocked<{...}>>. Accepts
// "#blocked<{...}>" and "#slice<{dim = D, parent = ...}>" (also spelled "#ttg.blocked" and
// "#ttg.slice", so Triton dumps paste in), with any whitespace between tokens; and the
// tensor-core encodings "#mma", "#dot_op" and "#shared" (parseTensorCoreEncoding).
#include "layout/blocked.h"
#include "layout/dot_operand.h"
#include "layout/encoding.h"
#include "layout/mma.h"
#include "layout/slice.h"
#include "layout/swizzled_shared.h"

#include <cctype>
#include <map>
#include <stdexcept>

namespace tessera {

namespace {

/// A field value: an integer list, a single integer, or a nested encoding.
struct FieldValue {
  std::vector<int> list;
  bool isList = false;
  EncodingPtr encoding;
};

class EncodingParser {
public:
  explicit EncodingParser(const std::string &input) : text(input) {}

  EncodingPtr parseAll() {
    EncodingPtr encoding = parseEncodingAt();
    skipSpace();
    if (pos != text.size())
      fail("unexpected trailing text");
    return encoding;
  }

private:
  [[noreturn]] void fail(const std::string &message) const {
    throw std::runtime_error("parseEncoding: " + message + " at offset " + std::to_string(pos) +
                             " in \"" + text + "\"");
  }

  void skipSpace() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }

  bool tryConsume(char expected) {
    skipSpace();
    if (pos < text.size() && text[pos] == expected) {
      ++pos;
      return true;
    }
    return false;
  }

  void expect(char expected) {
    if (!tryConsume(expected))
      fail(std::string("expected '") + expected + "'");
  }

  std::string parseIdentifier() {
    skipSpace();
    size_t start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) ||
                                 text[pos] == '_' || text[pos] == '.'))
      ++pos;
    if (start == pos)
      fail("expected a name");
    return text.substr(start, pos - start);
  }

  int parseInt() {
    skipSpace();
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
      ++pos;
    if (pos == start || (pos == start + 1 && text[start] == '-'))
      fail("expected an integer");
    if (pos - start > 9)
      fail("integer too large");
    return std::stoi(text.substr(start, pos - start));
  }

  FieldValue parseValue() {
    skipSpace();
    FieldValue value;
    if (pos < text.size() && text[pos] == '#') {
      value.encoding = parseEncodingAt();
    } else if (tryConsume('[')) {
      value.isList = true;
      if (!tryConsume(']')) {
        do
          value.list.push_back(parseInt());
        while (tryConsume(','));
        expect(']');
      }
    } else {
      value.list.push_back(parseInt());
    }
    return value;
  }

  /// `#name<{key = value, ...}>`; returns the fields by key.
  std::map<std::string, FieldValue> parseFields() {
    std::map<std::string, FieldValue> fields;
    expect('<');
    expect('{');
    if (!tryConsume('}')) {
      do {
        std::string key = parseIdentifier();
        if (fields.count(key))
          fail("duplicate field '" + key + "'");
        expect('=');
        fields[key] = parseValue();
      } while (tryConsume(','));
      expect('}');
    }
    expect('>');
    return fields;
  }

  std::vector<int> takeList(std::map<std::string, FieldValue> &fields, const std::string &key) {
    auto it = fields.find(key);
    if (it == fields.end() || !it->second.isList)
      fail("expected field '" + key + " = [...]'");
    std::vector<int> list = it->second.list;
    fields.erase(it);
    return list;
  }

  EncodingPtr parseEncodingAt() {
    skipSpace();
    size_t start = pos;
    expect('#');
    std::string name = parseIdentifier();
    if (name.rfind("ttg.", 0) == 0)
      name = name.substr(4);
    std::map<std::string, FieldValue> fields = parseFields();
    try {
      EncodingPtr result;
      if (name == "blocked") {
        std::vector<int> sizePerThread = takeList(fields, "sizePerThread");
        std::vector<int> threadsPerWarp = takeList(fields, "threadsPerWarp");
        std::vector<int> warpsPerCTA = takeList(fields, "warpsPerCTA");
        std::vector<int> order = takeList(fields, "order");
        result = std::make_shared<const BlockedEncoding>(sizePerThread, threadsPerWarp, warpsPerCTA,
                                                         order);
      } else if (name == "slice") {
        auto dimField = fields.find("dim");
        auto parentField = fields.find("parent");
        if (dimField == fields.end() || dimField->second.isList || dimField->second.encoding)
          fail("expected field 'dim = <integer>'");
        if (parentField == fields.end() || !parentField->second.encoding)
          fail("expected field 'parent = #...'");
        result = std::make_shared<const SliceEncoding>(dimField->second.list[0],
                                                       parentField->second.encoding);
        fields.erase("dim");
        fields.erase("parent");
      } else if (name == "mma" || name == "dot_op" || name == "shared") {
        result = parseTensorCoreEncoding(name, fields); // the tensor-core encodings
      } else {
        pos = start;
        fail("unknown encoding '#" + name + "'");
      }
      if (!fields.empty())
        fail("unknown field '" + fields.begin()->first + "' in #" + name);
      return result;
    } catch (const std::invalid_argument &error) {
      // Well-formed text with invalid parameters (e.g. a non power of two).
      pos = start;
      fail(error.what());
    }
  }

  int takeInt(std::map<std::string, FieldValue> &fields, const std::string &key) {
    auto it = fields.find(key);
    if (it == fields.end() || it->second.isList || it->second.encoding)
      fail("expected field '" + key + " = <integer>'");
    int value = it->second.list[0];
    fields.erase(it);
    return value;
  }

  /// #mma<{version, warpsPerCTA, instrShape}>, #dot_op<{opIdx, parent, kWidth}> and
  /// #shared<{vec, perPhase, maxPhase, order[, blockCols]}> (mma.h, dot_operand.h,
  /// swizzled_shared.h).
  EncodingPtr parseTensorCoreEncoding(const std::string &name,
                                      std::map<std::string, FieldValue> &fields) {
    if (name == "mma") {
      int version = takeInt(fields, "version");
      std::vector<int> warpsPerCTA = takeList(fields, "warpsPerCTA");
      std::vector<int> instrShape = takeList(fields, "instrShape");
      return std::make_shared<const MmaEncoding>(version, warpsPerCTA, instrShape);
    }
    if (name == "dot_op") {
      int opIdx = takeInt(fields, "opIdx");
      auto parentField = fields.find("parent");
      if (parentField == fields.end() || !parentField->second.encoding)
        fail("expected field 'parent = #...'");
      EncodingPtr parent = parentField->second.encoding;
      fields.erase(parentField);
      int kWidth = takeInt(fields, "kWidth");
      return std::make_shared<const DotOperandEncoding>(opIdx, parent, kWidth);
    }
    int vec = takeInt(fields, "vec");
    int perPhase = takeInt(fields, "perPhase");
    int maxPhase = takeInt(fields, "maxPhase");
    std::vector<int> order = takeList(fields, "order");
    int blockCols = fields.count("blockCols") ? takeInt(fields, "blockCols") : 0;
    return std::make_shared<const SharedEncoding>(vec, perPhase, maxPhase, order, blockCols);
  }

  const std::string &text;
  size_t pos = 0;
};

} // namespace

EncodingPtr parseEncoding(const std::string &text) { return EncodingParser(text).parseAll(); }

} // namespace tessera
