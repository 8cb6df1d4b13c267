#include "perfgate/text.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace perfgate {

Utf8Char decode_utf8(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {lead, 1};
  const std::size_t length = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0;
  if (length == 0 || i + length > text.size()) return {kReplacementCharacter, 1};
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {kReplacementCharacter, 1};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values beyond U+10FFFF are not UTF-8.
  const bool overlong = (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return {kReplacementCharacter, 1};
  return {cp, length};
}

namespace {

std::string code_point_label(char32_t cp) { return fmt::format("&lt;U+{:04X}&gt;", static_cast<std::uint32_t>(cp)); }

// The Markdown for one ASCII character; `name`: control characters shown instead of breaking or dropped.
void escape_ascii(std::string& out, std::string_view text, std::size_t i, bool name) {
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
      return;
    case '<': out += "&lt;"; return;
    case '>': out += "&gt;"; return;
    case '&': out += "&amp;"; return;
    default: break;
  }
  const bool control = static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (!control) {
    out += c;
  } else if (name) {
    out += code_point_label(static_cast<unsigned char>(c));
  } else if (c == '\r') {
    if (i + 1 >= text.size() || text[i + 1] != '\n') out += "<br>";  // CRLF -> one break
  } else if (c == '\n') {
    out += "<br>";
  }  // other control characters of a message are dropped
}

std::string escape_markdown_text(std::string_view text, bool name) {
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      escape_ascii(out, text, i, name);
      ++i;
      continue;
    }
    const Utf8Char d = decode_utf8(text, i);
    if (d.code_point == kReplacementCharacter && d.length == 1) out += "\xEF\xBF\xBD";
    else if (is_hidden_code_point(d.code_point)) out += code_point_label(d.code_point);
    else out.append(text.substr(i, d.length));
    i += d.length;
  }
  return out;
}

}  // namespace

bool is_hidden_code_point(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return true;       // C0, DEL, C1
  if (cp == 0x061C || cp == 0x200E || cp == 0x200F) return true;  // bidi marks
  if (cp >= 0x202A && cp <= 0x202E) return true;                  // embeddings, overrides
  if (cp >= 0x2066 && cp <= 0x2069) return true;                  // isolates
  if ((cp >= 0x200B && cp <= 0x200D) || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF) return true;  // invisible
  return cp == 0x2028 || cp == 0x2029;  // line / paragraph separators
}

std::string escape_markdown(std::string_view text) { return escape_markdown_text(text, false); }

std::string escape_name_markdown(std::string_view name) { return escape_markdown_text(name, true); }

std::string shorten(const std::string& name, std::size_t max) {
  return name.size() <= max ? name : name.substr(0, max - 3) + "...";
}

std::string printable_name(std::string_view name, std::size_t max_len) {
  std::string out;
  std::size_t shown = 0;  // code points, so that a cut never splits one
  for (std::size_t i = 0; i < name.size() && shown < max_len;) {
    const Utf8Char d = decode_utf8(name, i);
    if (d.code_point == kReplacementCharacter && d.length == 1)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(name[i]));
    else if (d.code_point < 0x80 && is_hidden_code_point(d.code_point))
      out += fmt::format("\\x{:02x}", static_cast<std::uint32_t>(d.code_point));
    else if (is_hidden_code_point(d.code_point))
      out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(d.code_point));
    else out.append(name.substr(i, d.length));
    i += d.length;
    ++shown;
    if (shown == max_len && i < name.size()) out += "...";
  }
  return out;
}

std::string code_span(const std::string& text) { return "<code>" + escape_name_markdown(text) + "</code>"; }

std::string regex_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string first_and_more(const std::vector<std::string>& items, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) out += (i == 0 ? "" : ", ") + items[i];
  if (items.size() > shown) out += fmt::format(" and {} more", items.size() - shown);
  return out;
}

}  // namespace perfgate
