#include "perfgate/context_pattern.hpp"

#include <fmt/format.h>

#include "perfgate/errors.hpp"

namespace perfgate {

bool names(const std::optional<ContextPattern>& pattern, const std::string& name) {
  return pattern && std::regex_match(name, pattern->regex);
}

std::optional<ContextPattern> context_pattern(const ResultSet& baseline, const ResultSet& current,
                                              const std::string& key) {
  for (const ResultSet* side : {&current, &baseline}) {
    for (const auto& c : side->contexts) {
      const std::string pattern = c.get(key);
      if (pattern.empty()) continue;
      try {
        return ContextPattern{pattern, std::regex(pattern, std::regex::ECMAScript)};
      } catch (const std::regex_error& e) {
        throw InputError(c.source_file, "", "context." + key,
                         fmt::format("'{}' is no valid regex: {}", pattern, e.what()));
      }
    }
  }
  return std::nullopt;
}

}  // namespace perfgate
