// Encoding alias tests: the printer writes each distinct layout encoding once as `#name = ...`
// before the module (named by its leading word, numbered from the second of a word), types
// refer to the alias, and the parser reads aliases as well as inline encodings.
#include "ir/builder.h"
#include "ir/diagnostics.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

using namespace tessera::ir;

namespace {

const char *kBlocked4 =
    "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>";
const char *kBlocked8 =
    "#blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>";
const char *kBlocked2d = "#blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], "
                         "warpsPerCTA = [4, 1], order = [1, 0]}>";

/// convert_layout from a 1-D blocked(4) range to blocked(8), then a 2-D slice: three words'
/// worth of encodings, one of them used twice.
std::unique_ptr<Module> buildModule() {
  auto m = std::make_unique<Module>();
  Builder b(&m->body());
  Operation *func = b.create(OpCode::Func, {}, {}, {{"sym_name", std::string("k")}}, 1);
  b.setInsertionPointToEnd(&func->body());
  auto blocked4 = tessera::parseEncoding(kBlocked4);
  auto blocked8 = tessera::parseEncoding(kBlocked8);
  auto slice = tessera::parseEncoding(std::string("#slice<{dim = 1, parent = ") + kBlocked2d +
                                      "}>");
  Type range4 = Type::tensor({64}, Type::i32(), blocked4);
  Value *r = b.create(OpCode::MakeRange, {}, {range4}, {{"start", int64_t(0)},
                                                        {"end", int64_t(64)}})
                 ->result();
  Value *c = b.create(OpCode::ConvertLayout, {r}, {range4.withEncoding(blocked8)})->result();
  b.create(OpCode::ConvertLayout, {c}, {range4.withEncoding(slice)});
  b.create(OpCode::ConvertLayout, {r}, {range4.withEncoding(blocked8)});
  b.create(OpCode::Return, {}, {});
  return m;
}

} // namespace

TEST(EncodingAlias, PrintsEachEncodingOnceBeforeTheModule) {
  auto m = buildModule();
  ASSERT_NO_THROW(verify(*m));
  std::string text = toString(*m);
  std::string expectedHeader = std::string("#blocked = ") + kBlocked4 + "\n#blocked1 = " +
                               kBlocked8 + "\n#slice = #slice<{dim = 1, parent = " +
                               kBlocked2d + "}>\nmodule {\n";
  EXPECT_EQ(text.substr(0, expectedHeader.size()), expectedHeader) << text;
  EXPECT_NE(text.find("-> tensor<64xi32, #blocked>"), std::string::npos) << text;
  EXPECT_NE(text.find("(tensor<64xi32, #blocked>) -> tensor<64xi32, #blocked1>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-> tensor<64xi32, #slice>"), std::string::npos) << text;
  // Past the header, no encoding is spelled out.
  EXPECT_EQ(text.find("<{", expectedHeader.size()), std::string::npos) << text;
}

TEST(EncodingAlias, InlineOptionPrintsFullEncodings) {
  auto m = buildModule();
  PrintOptions inlineText;
  inlineText.aliases = false;
  std::string text = toString(*m, inlineText);
  EXPECT_EQ(text.rfind("module {", 0), 0u) << text;
  EXPECT_NE(text.find(std::string("-> tensor<64xi32, ") + kBlocked8 + ">"), std::string::npos)
      << text;
}

TEST(EncodingAlias, AliasAndInlineTextParseToTheSameModule) {
  auto m = buildModule();
  PrintOptions inlineText;
  inlineText.aliases = false;
  std::unique_ptr<Module> fromAliases, fromInline;
  ASSERT_NO_THROW(fromAliases = parseModule(toString(*m)));
  ASSERT_NO_THROW(fromInline = parseModule(toString(*m, inlineText)));
  ASSERT_NO_THROW(verify(*fromAliases));
  EXPECT_EQ(toString(*fromAliases), toString(*m));
  EXPECT_EQ(toString(*fromInline), toString(*m));
  EXPECT_EQ(toString(*fromAliases, inlineText), toString(*m, inlineText));
  // The parsed types carry real encodings, equal to the built ones.
  Operation &func = *m->body().operations().front();
  Operation &parsedFunc = *fromAliases->body().operations().front();
  auto it = func.body().operations().begin();
  auto parsedIt = parsedFunc.body().operations().begin();
  for (int i = 0; i < 4; ++i, ++it, ++parsedIt)
    EXPECT_EQ((*it)->result(0)->type(), (*parsedIt)->result(0)->type()) << i;
}

TEST(EncodingAlias, ParsesHandWrittenAliasesAndMixedUses) {
  std::string text = std::string("// a comment\n#b = ") + kBlocked4 +
                     "\n#other_name=" + kBlocked8 +
                     "\nfunc @f() {\n"
                     "  %0 = make_range {end = 64, start = 0} : () -> tensor<64xi32, #b>\n"
                     "  %1 = convert_layout %0 : (tensor<64xi32, " +
                     kBlocked4 + ">) -> tensor<64xi32, #other_name >\n" +
                     "  return : () -> ()\n}\n";
  std::unique_ptr<Module> m;
  ASSERT_NO_THROW(m = parseModule(text)) << text;
  Operation &func = *m->body().operations().front();
  const Operation &range = *func.body().operations().front();
  const Operation &convert = **std::next(func.body().operations().begin());
  EXPECT_EQ(range.result(0)->type().encoding()->str(), kBlocked4);
  EXPECT_EQ(convert.operand(0)->type(), range.result(0)->type());
  EXPECT_EQ(convert.result(0)->type().encoding()->str(), kBlocked8);
}

TEST(EncodingAlias, ReportsUndefinedAndDuplicateAliases) {
  struct Bad {
    std::string text, position, message;
  };
  const Bad cases[] = {
      {"func @f(%x: tensor<4xi32, #nope>) {\n}", "1:27", "undefined encoding alias '#nope'"},
      {std::string("#a = ") + kBlocked4 + "\n#a = " + kBlocked8 + "\nmodule {\n}", "2:1",
       "redefinition of encoding alias '#a'"},
      {"#a = #blocked<{sizePerThread = [4]", "1:6", "unterminated encoding in alias '#a'"},
      {"#a = #blocked<{nonsense}>\nmodule {\n}", "1:6", "invalid encoding"},
  };
  for (const Bad &bad : cases) {
    SCOPED_TRACE(bad.text);
    try {
      parseModule(bad.text);
      ADD_FAILURE() << "expected a CompileError";
    } catch (const CompileError &error) {
      EXPECT_EQ(error.location(), bad.position) << error.what();
      EXPECT_NE(error.message().find(bad.message), std::string::npos) << error.what();
    }
  }
}
