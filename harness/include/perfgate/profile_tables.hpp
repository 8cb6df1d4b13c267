#pragma once
// The differential profiles' tables (explain.hpp) as Markdown, rendered in report/ from the diffs' plain rows.
#include <string>

#include "perfgate/explain.hpp"
#include "perfgate/timeline.hpp"

namespace perfgate {

// A diff's table: its heading line and at most the 15 largest changes; empty when the diff has no table.
std::string render_profile_diff(const ProfileDiff& diff);

// The GPU timeline diff's before/after table: span, busy, kernels, copies, concurrency, gaps, launches and the
// critical path's five largest kernels, per repetition.
std::string render_timeline_table(const timeline::TimelineDiff& diff);

}  // namespace perfgate
