#pragma once
// Text made safe for where it goes: Markdown and terminals, for every room that shows text from users' code
// (benchmark names, messages: the reporters, the dashboard, the differential profiles' tables in explain.hpp),
// and regular expressions (--benchmark_filter). The lowest floor, so that no analysis, history or run has to
// include a renderer for it.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace perfgate {

// One UTF-8 sequence at text[i]: its code point and length; length 1 and U+FFFD for a byte that starts none.
struct Utf8Char {
  char32_t code_point;
  std::size_t length;
};
inline constexpr char32_t kReplacementCharacter = 0xFFFD;
Utf8Char decode_utf8(std::string_view text, std::size_t i);

// Escapes text for a Markdown table cell or inline text: | ` * _ [ ] ~ \ # are backslash-escaped,
// < > & become entities, newlines become <br>, other control characters are dropped; characters that reorder
// or hide text (bidirectional controls such as U+202E, zero-width characters, C1 controls) are shown as
// <U+202E>, and bytes that are not UTF-8 as U+FFFD, so that no text can make a line read as another.
std::string escape_markdown(std::string_view text);
// A benchmark name for Markdown or HTML (escape_markdown's rules, and newlines and other control characters shown
// as <U+000A> instead of breaking the line): a name reads as itself, on one line.
std::string escape_name_markdown(std::string_view name);
// A name for the terminal: control, bidirectional and invisible characters as \xNN / \u{202e}, cut to max_len.
std::string printable_name(std::string_view name, std::size_t max_len = 200);
// The code point behind a "shown as <U+XXXX>" decision: true for C0/C1 controls, DEL, bidirectional controls
// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), zero-width and invisible characters (U+200B-U+200D,
// U+2060-U+2064, U+FEFF), and line/paragraph separators (U+2028, U+2029).
bool is_hidden_code_point(char32_t code_point);
// Text as inline code in Markdown (a table cell too): escape_name_markdown inside <code>, so that no name can break
// out of its cell or span.
std::string code_span(const std::string& text);
// A long name (a kernel's demangled signature) cut to `max` bytes, ending in "..." when cut.
std::string shorten(const std::string& name, std::size_t max = 70);
// Escapes regex metacharacters so that `text` matches literally (for --benchmark_filter).
std::string regex_escape(std::string_view text);
// The first `shown` items and how many more: "a, b, c and 4 more" (items as they are: escape them first where needed).
std::string first_and_more(const std::vector<std::string>& items, std::size_t shown);

}  // namespace perfgate
