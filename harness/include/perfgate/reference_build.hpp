#pragma once
// Reference builds: the bench binaries of another revision, built in a git worktree beside the build
// tree, so that `perfgate run --against REV` (and bisection) can measure both revisions in one session
// on one machine (docs/running.md, "The relative gate").
//
// One fixed place per build tree (<build>/reference/{src,build}): a new revision is checked out into
// the same worktree and built incrementally, so only the files that differ recompile, and a compiler
// cache (ccache, used when found on PATH) serves what a fresh folder would otherwise rebuild.
// A marker file written after a successful build names the commit and targets it holds; a folder
// without a matching marker is never used. A build that fails leaves no marker, keeps its log, and
// the next attempt starts clean.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "perfgate/errors.hpp"  // ReferenceError

namespace perfgate {

// Facts about a git checkout.
struct CheckoutState {
  std::string head;      // full SHA of HEAD
  bool dirty = false;    // tracked files differ from HEAD
  bool shallow = false;  // a shallow clone: history may be missing
};

// Throws ReferenceError(not_a_checkout) when `source_dir` is not inside a git work tree.
CheckoutState checkout_state(const std::filesystem::path& source_dir);

// The full SHA of `rev` in the repository of `source_dir`. Throws ReferenceError(unknown_revision) with a
// message that says what to do (a shallow clone says so).
std::string resolve_revision(const std::filesystem::path& source_dir, const std::string& rev);

// The revision to gate against when none was given: the merge base of HEAD with the default branch
// (origin/HEAD, origin/main, origin/master, main, master: the first that exists). When that is HEAD itself
// (a run on the default branch), HEAD's first parent, or HEAD itself if the tree has uncommitted changes
// (then the change under test is exactly those changes). Empty, with `why` saying so, when there is none.
struct AutoReference {
  std::string commit;       // full SHA, or empty
  std::string description;  // "merge base of HEAD with origin/main", "HEAD~1 (HEAD is on main)", ...
  std::string why_none;     // when commit is empty
};
AutoReference automatic_reference(const std::filesystem::path& source_dir);

struct ReferenceBuildOptions {
  std::filesystem::path source_dir;     // the checkout holding the revision
  std::string commit;                   // full SHA (resolve_revision)
  std::filesystem::path root;           // <build>/reference: src/ and build/ go below it
  std::vector<std::string> targets;     // e.g. bench_synthetic; those REV lacks are left out
  std::vector<std::string> cmake_args;  // configure arguments (build type, options)
  // Non-empty: run this shell command in the worktree instead of CMake, with $PERFGATE_BUILD_DIR set to
  // <root>/build; a target is built when the command left an executable of that name there (see `binaries`).
  std::string build_command;
  std::string build_command_flag = "--build-command";  // the flag that sets it, for the advice of a failed configure
  int jobs = 2;
  bool use_ccache = true;                            // when ccache is on search_path
  std::string search_path;                           // PATH (the CLI passes it): where ccache is looked for
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

struct ReferenceBuild {
  std::string commit;
  std::filesystem::path build_dir;
  std::filesystem::path bin_dir;             // <build_dir>/bin
  std::vector<std::string> built_targets;    // requested targets that REV has
  std::vector<std::string> missing_targets;  // requested targets that REV does not define
  // Each requested target's executable: <build_dir>/bin/<target>, else <build_dir>/<target>, else the first (in
  // path order) below <build_dir>, where a CMake project without an output directory of its own leaves it.
  std::map<std::string, std::filesystem::path> binaries;
  bool reused = false;  // the marker matched: nothing was built
  bool ccache = false;
  double checkout_seconds = 0;
  double configure_seconds = 0;
  double build_seconds = 0;
  std::filesystem::path log_file;
};

// Checks out and builds `options.commit`. Throws ReferenceError.
ReferenceBuild build_reference(const ReferenceBuildOptions& options);

// The commits after `good` up to `bad` on the ancestry path, oldest first (empty when good is not an
// ancestor of bad). Throws ReferenceError(tool_failed) when git fails.
std::vector<std::string> commits_between(const std::filesystem::path& source_dir, const std::string& good,
                                         const std::string& bad);
// A commit's subject line ("" when git cannot tell).
std::string commit_subject(const std::filesystem::path& source_dir, const std::string& commit);

}  // namespace perfgate
