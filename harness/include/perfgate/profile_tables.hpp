#pragma once
// The differential profiles' tables (explain.hpp) as Markdown, rendered in report/ from the diffs' plain rows.
#include <string>

#include "perfgate/explain.hpp"

namespace perfgate {

// A diff's table: its heading line and at most the 15 largest changes; empty when the diff has no table.
std::string render_profile_diff(const ProfileDiff& diff);

}  // namespace perfgate
