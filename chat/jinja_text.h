// Python's str methods on UTF-8 bytes, counting code points where Python
// does: strip/split use Python's Unicode whitespace (str.isspace), len and
// slices count code points. Case mapping (upper, lower, title, capitalize)
// covers ASCII only; other characters pass through unchanged.
// Invalid UTF-8 counts one code point per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::jinja {

// Byte offsets of each code point of S, plus S.size() at the end:
// [n_code_points + 1].
std::vector<size_t> CodePointOffsets(std::string_view s);
size_t CodePointCount(std::string_view s);
// Decodes the code point at S[I], setting *LEN to its byte length.
uint32_t DecodeAt(std::string_view s, size_t i, size_t* len);
void AppendUtf8(uint32_t cp, std::string* out);

bool PyIsSpace(uint32_t cp);
// str.strip / lstrip / rstrip: CHARS absent strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(): SEP absent splits on whitespace runs; MAXSPLIT < 0 is no limit.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
// str.replace(old, new, count); COUNT < 0 replaces all. Empty OLD inserts NEW
// between code points, as Python does.
std::string PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
std::string PyCapitalize(std::string_view s);  // first upper, rest lower
std::string PyTitle(std::string_view s);       // Python's str.title (ASCII letters)
// Jinja's title filter (not str.title): each word, split after whitespace and
// - ( { [ <, gets its first character upper-cased and the rest lower-cased.
std::string JinjaTitle(std::string_view s);
// repr(str): single quotes unless the text has ' and no ".
void AppendPyStringRepr(std::string_view s, std::string* out);
// JSON string body as json.dumps writes it.
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);

}  // namespace specserve::jinja
