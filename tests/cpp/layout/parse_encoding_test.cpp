// Tests for parseEncoding (cpp/layout/parse_encoding.cpp): str() round trips for random
// blocked and nested slice encodings, tolerant spellings, and clear errors on malformed text.
#include "layout/encoding.h"
#include "layout/slice.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;

TEST(ParseEncodingTest, KnownTextForms) {
  EncodingPtr blocked = parseEncoding(
      "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>");
  EXPECT_TRUE(blocked->equals(BlockedEncoding({4}, {32}, {4}, {0})));
  EncodingPtr slice = parseEncoding(
      "#slice<{dim = 1, parent = #blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], "
      "warpsPerCTA = [4, 1], order = [1, 0]}>}>");
  auto parent =
      std::make_shared<const BlockedEncoding>(std::vector<int>{1, 4}, std::vector<int>{2, 16},
                                              std::vector<int>{4, 1}, std::vector<int>{1, 0});
  EXPECT_TRUE(slice->equals(SliceEncoding(1, parent)));
  EXPECT_EQ(slice->rank(), 1);
}

TEST(ParseEncodingTest, AcceptsTritonSpellingAndWhitespace) {
  EncodingPtr encoding = parseEncoding(
      "  #ttg.slice<{ parent=#ttg.blocked<{order=[0],warpsPerCTA=[2],threadsPerWarp=[32],\n"
      "sizePerThread=[1]}> , dim=0 }>  ");
  EXPECT_EQ(encoding->str(),
            "#slice<{dim = 0, parent = #blocked<{sizePerThread = [1], threadsPerWarp = [32], "
            "warpsPerCTA = [2], order = [0]}>}>");
}

TEST(ParseEncodingTest, RandomRoundTrips) {
  Rng rng(8);
  for (int trial = 0; trial < 300; ++trial) {
    int rank = 1 + rng() % 4;
    EncodingPtr encoding =
        layout_test::randomBlocked(rng, rank, layout_test::randomPowerOfTwo(rng, 3));
    // Slice up to rank - 1 times, nesting slices of slices.
    int slices = rng() % rank;
    for (int i = 0; i < slices; ++i)
      encoding = std::make_shared<const SliceEncoding>(rng() % encoding->rank(), encoding);
    std::string text = encoding->str();
    EncodingPtr parsed = parseEncoding(text);
    EXPECT_TRUE(parsed->equals(*encoding)) << text;
    EXPECT_EQ(parsed->str(), text);
  }
}

void expectParseError(const std::string &text, const std::string &fragment) {
  try {
    parseEncoding(text);
    ADD_FAILURE() << "no error for: " << text;
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
        << "message '" << error.what() << "' lacks '" << fragment << "'";
  }
}

TEST(ParseEncodingTest, MalformedTextThrowsRuntimeError) {
  const std::string good =
      "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>";
  expectParseError("", "expected '#'");
  expectParseError("#mfma<{}>", "unknown encoding '#mfma'"); // #mma is known (mma.h)
  expectParseError(good + " x", "unexpected trailing text");
  expectParseError("#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4]}>",
                   "expected field 'order = [...]'");
  expectParseError("#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], "
                   "order = [0], color = [1]}>",
                   "unknown field 'color'");
  expectParseError("#blocked<{sizePerThread = [4, ], threadsPerWarp = [32]}>",
                   "expected an integer");
  expectParseError("#blocked<{sizePerThread = [3], threadsPerWarp = [32], warpsPerCTA = [4], "
                   "order = [0]}>",
                   "powers of two");
  expectParseError("#blocked<{sizePerThread = [4], sizePerThread = [4]}>", "duplicate field");
  expectParseError("#blocked<{sizePerThread = [4]", "expected '}'");
  expectParseError("#slice<{dim = 1}>", "expected field 'parent = #...'");
  expectParseError("#slice<{dim = 1, parent = " + good + "}>", "is not a dim of");
  expectParseError("#slice<{dim = [1], parent = " + good + "}>",
                   "expected field 'dim = <integer>'");
  expectParseError("#blocked<{sizePerThread = [99999999999]}>", "integer too large");
}

} // namespace
} // namespace tessera
