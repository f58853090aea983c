// Unit tests for common/cli_args.h: `--flag value`, `--flag=value`, boolean
// flags, defaults, positionals, --help, typed accessors with ranges, and
// INVALID_ARGUMENT errors that name the flag.
#include "common/cli_args.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace specserve {
namespace {

using testing::HasSubstr;

// A command line: argv[0] is the program name.
class Argv {
 public:
  Argv(std::initializer_list<std::string> args) : strs_{"prog"} {
    strs_.insert(strs_.end(), args.begin(), args.end());
    for (std::string& s : strs_) ptrs_.push_back(s.data());
    ptrs_.push_back(nullptr);
  }
  Argv(const Argv&) = delete;  // ptrs_ point into strs_
  Argv& operator=(const Argv&) = delete;
  int argc() const { return static_cast<int>(strs_.size()); }
  char** argv() { return ptrs_.data(); }

 private:
  std::vector<std::string> strs_;
  std::vector<char*> ptrs_;
};

CliArgs MakeArgs() {
  CliArgs a("usage: prog [flags] FILE...");
  a.Flag("port", "8080", "port to listen on");
  a.Flag("temp", "0.7", "sampling temperature");
  a.Flag("model", "", "model path");
  a.BoolFlag("verbose", "log more");
  return a;
}

absl::Status Parse(CliArgs& a, Argv argv, int first = 1) { return a.Parse(argv.argc(), argv.argv(), first); }

TEST(CliArgs, DefaultsWhenNotGiven) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {}).ok());
  EXPECT_EQ(a.Str("port"), "8080");
  EXPECT_FALSE(a.Given("port"));
  EXPECT_EQ(*a.Int("port", 1, 65535), 8080);
  EXPECT_DOUBLE_EQ(*a.Double("temp", 0, 2), 0.7);
  EXPECT_EQ(a.Str("model"), "");
  EXPECT_FALSE(a.Bool("verbose"));
  EXPECT_FALSE(a.help());
  EXPECT_TRUE(a.positional().empty());
}

TEST(CliArgs, SpaceAndEqualsForms) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {"--port", "9000", "--model=/m/x.gguf", "--temp=1.5"}).ok());
  EXPECT_TRUE(a.Given("port"));
  EXPECT_EQ(*a.Int("port", 1, 65535), 9000);
  EXPECT_EQ(a.Str("model"), "/m/x.gguf");
  EXPECT_DOUBLE_EQ(*a.Double("temp", 0, 2), 1.5);
}

TEST(CliArgs, ValuesMayLookLikeOtherThings) {
  CliArgs a = MakeArgs();
  a.Flag("offset", "0", "an offset");
  // A value after a space is taken as is, even a negative number; after '='
  // everything up to the end is the value, '=' included; an empty value is a value.
  ASSERT_TRUE(Parse(a, {"--offset", "-3", "--model=a=b", "--temp="}).ok());
  EXPECT_EQ(*a.Int("offset", -10, 10), -3);
  EXPECT_EQ(a.Str("model"), "a=b");
  EXPECT_TRUE(a.Given("temp"));
  EXPECT_EQ(a.Str("temp"), "");
  EXPECT_FALSE(a.Double("temp", 0, 2).ok());  // given empty: not the default
}

TEST(CliArgs, UnknownFlagIsAnErrorNamingIt) {
  CliArgs a = MakeArgs();
  absl::Status st = Parse(a, {"--prot", "9000"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("--prot"));
  CliArgs b = MakeArgs();
  st = Parse(b, {"--prot=9000"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("--prot"));
  EXPECT_THAT(std::string(st.message()), testing::Not(HasSubstr("9000")));
}

TEST(CliArgs, MissingValueIsAnErrorNamingTheFlag) {
  CliArgs a = MakeArgs();
  absl::Status st = Parse(a, {"--verbose", "--port"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("--port"));
}

TEST(CliArgs, BooleanFlags) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {"--verbose"}).ok());
  EXPECT_TRUE(a.Bool("verbose"));
  EXPECT_TRUE(a.Given("verbose"));
  for (const char* v : {"true", "1", "yes"}) {
    CliArgs b = MakeArgs();
    ASSERT_TRUE(Parse(b, {std::string("--verbose=") + v}).ok());
    EXPECT_TRUE(b.Bool("verbose")) << v;
  }
  for (const char* v : {"false", "0", "no"}) {
    CliArgs b = MakeArgs();
    ASSERT_TRUE(Parse(b, {std::string("--verbose=") + v}).ok());
    EXPECT_FALSE(b.Bool("verbose")) << v;
  }
}

TEST(CliArgs, BooleanFlagTakesNoValueFromTheNextArgument) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {"--verbose", "input.txt", "--port", "1"}).ok());
  EXPECT_TRUE(a.Bool("verbose"));
  EXPECT_EQ(a.positional(), std::vector<std::string>{"input.txt"});
  EXPECT_EQ(*a.Int("port", 1, 65535), 1);
}

TEST(CliArgs, PositionalsInOrderAndFirstArgument) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {"serve", "a.txt", "--port=1", "b.txt", "-x"}, 2).ok());
  // argv[1] ("serve", a subcommand) is skipped; "-x" is not a --flag.
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"a.txt", "b.txt", "-x"}));
  EXPECT_EQ(a.Str("port"), "1");
}

TEST(CliArgs, LaterValueWins) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {"--port", "1", "--port=2"}).ok());
  EXPECT_EQ(a.Str("port"), "2");
}

TEST(CliArgs, HelpFlagAndText) {
  for (const char* h : {"--help", "-h"}) {
    CliArgs a = MakeArgs();
    ASSERT_TRUE(Parse(a, {"--port", "5", h}).ok()) << h;
    EXPECT_TRUE(a.help()) << h;
    EXPECT_EQ(a.Str("port"), "5");
  }
  const std::string text = MakeArgs().HelpText();
  EXPECT_THAT(text, HasSubstr("usage: prog [flags] FILE..."));
  EXPECT_THAT(text, HasSubstr("--port"));
  EXPECT_THAT(text, HasSubstr("port to listen on"));
  EXPECT_THAT(text, HasSubstr("8080"));
  EXPECT_THAT(text, HasSubstr("--verbose"));
  EXPECT_THAT(text, HasSubstr("log more"));
  // Declaration order.
  EXPECT_LT(text.find("--port"), text.find("--temp"));
  EXPECT_LT(text.find("--model"), text.find("--verbose"));
}

TEST(CliArgs, IntRangeIsInclusiveAndErrorsNameTheFlag) {
  auto parse_port = [](const std::string& v) {
    CliArgs a = MakeArgs();
    EXPECT_TRUE(Parse(a, {"--port", v}).ok());
    return a.Int("port", 1, 65535);
  };
  EXPECT_EQ(*parse_port("1"), 1);
  EXPECT_EQ(*parse_port("65535"), 65535);
  for (const char* bad : {"0", "65536", "-1", "abc", "12abc", "1.5", ""}) {
    absl::StatusOr<int64_t> v = parse_port(bad);
    ASSERT_FALSE(v.ok()) << "'" << bad << "' accepted as " << *v;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("--port")) << bad;
  }
}

TEST(CliArgs, DoubleRangeAndErrors) {
  auto parse_temp = [](const std::string& v) {
    CliArgs a = MakeArgs();
    EXPECT_TRUE(Parse(a, {"--temp=" + v}).ok());
    return a.Double("temp", 0.0, 2.0);
  };
  EXPECT_DOUBLE_EQ(*parse_temp("0"), 0.0);
  EXPECT_DOUBLE_EQ(*parse_temp("2"), 2.0);
  EXPECT_DOUBLE_EQ(*parse_temp("0.25"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_temp("1e-1"), 0.1);
  for (const char* bad : {"-0.1", "2.0001", "nan", "inf", "abc", "0.5x"}) {
    absl::StatusOr<double> v = parse_temp(bad);
    ASSERT_FALSE(v.ok()) << "'" << bad << "' accepted as " << *v;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("--temp")) << bad;
  }
}

TEST(CliArgs, InvalidDefaultIsReportedWhenRead) {
  CliArgs a = MakeArgs();
  ASSERT_TRUE(Parse(a, {}).ok());
  // --model has an empty default: not an integer.
  absl::StatusOr<int64_t> v = a.Int("model", 0, 10);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("--model"));
}

}  // namespace
}  // namespace specserve
