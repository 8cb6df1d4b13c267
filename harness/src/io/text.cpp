#include "perfgate/text.hpp"

namespace perfgate {

std::string escape_markdown(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '|':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '~':
      case '\\':
      case '#':
        out += '\\';
        out += c;
        break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\r':
        if (i + 1 < text.size() && text[i + 1] == '\n') break;  // CRLF -> one break
        out += "<br>";
        break;
      case '\n': out += "<br>"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) break;  // other control characters
        out += c;
    }
  }
  return out;
}

std::string code_span(const std::string& text) { return "<code>" + escape_markdown(text) + "</code>"; }

std::string regex_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace perfgate
