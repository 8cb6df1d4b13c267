#pragma once
// Text made safe for where it goes: Markdown (the reporters, and the differential profiles' tables in
// explain.hpp) and regular expressions (--benchmark_filter). The lowest floor, so that no analysis, history or
// run has to include a renderer for it.
#include <string>
#include <string_view>

namespace perfgate {

// Escapes text for a Markdown table cell or inline text: | ` * _ [ ] ~ \ # are backslash-escaped,
// < > & become entities, newlines become <br>, other control characters are dropped.
std::string escape_markdown(std::string_view text);
// Text as inline code in Markdown (a table cell too): escape_markdown inside <code>, so that no name can break
// out of its cell or span.
std::string code_span(const std::string& text);
// Escapes regex metacharacters so that `text` matches literally (for --benchmark_filter).
std::string regex_escape(std::string_view text);

}  // namespace perfgate
