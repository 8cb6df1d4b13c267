#include "perfgate/errors.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace perfgate {

namespace {

// FILE: benchmark 'NAME': field 'KEY': detail. Without a file the error is about the command line (a flag, the
// arguments), so the line starts with what was given there: "--suite: which suite's baseline to store".
std::string format_input_error(const std::string& file, const std::string& benchmark, const std::string& field,
                               const std::string& detail) {
  std::vector<std::string> parts;
  if (!file.empty()) parts.push_back(one_line(file));
  if (!benchmark.empty()) parts.push_back(fmt::format("benchmark '{}'", one_line(benchmark)));
  if (!field.empty())
    parts.push_back(file.empty() && benchmark.empty() ? one_line(field, 120)
                                                      : fmt::format("field '{}'", one_line(field, 120)));
  parts.push_back(one_line(detail, 600));
  return fmt::format("{}", fmt::join(parts, ": "));
}

}  // namespace

std::string one_line(std::string_view text, std::size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

InputError::InputError(std::string file_, std::string benchmark_, std::string field_, std::string detail_)
    : std::runtime_error(format_input_error(file_, benchmark_, field_, detail_)),
      file(std::move(file_)),
      benchmark(std::move(benchmark_)),
      field(std::move(field_)),
      detail(std::move(detail_)) {}

ReferenceError::ReferenceError(Kind k, const std::string& message, std::string log)
    : std::runtime_error(message), kind(k), log_file(std::move(log)) {}

}  // namespace perfgate
