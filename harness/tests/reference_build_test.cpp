// Reference builds against real git repositories and real CMake builds of a two-file project: revisions
// that build, one that does not, a target a revision lacks, reuse, shallow clones, and the automatic
// choice of the reference (merge base, HEAD~1 on the default branch, HEAD with uncommitted changes).
#include "perfgate/reference_build.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perfgate/runner.hpp"

namespace fs = std::filesystem;
using perfgate::ReferenceError;

namespace {

std::string run(const fs::path& dir, std::vector<std::string> argv) {
  perfgate::ProcessSpec spec;
  argv.insert(argv.begin(), {"git", "-C", dir.string(), "-c", "user.name=perfgate test", "-c",
                             "user.email=test@perfgate.invalid", "-c", "init.defaultBranch=main"});
  spec.argv = argv;
  std::string out;
  spec.on_stdout_line = [&](const std::string& line) { out += line; };
  const auto r = perfgate::run_process(spec);
  EXPECT_TRUE(r.ok()) << r.describe() << ": " << r.stderr_tail;
  return out;
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

const char* kCMakeLists = R"(cmake_minimum_required(VERSION 3.20)
project(reference_test CXX)
add_executable(bench_foo foo.cpp)
set_target_properties(bench_foo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
)";

// A repository on branch main: commit 1 builds, commit 2 (HEAD) does not.
struct Repo {
  fs::path root;
  std::string good, broken;
};

Repo make_repo(const std::string& name) {
  Repo r;
  r.root = fs::temp_directory_path() / ("perfgate_reference_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(r.root);
  fs::create_directories(r.root / "repo");
  const fs::path repo = r.root / "repo";
  run(repo, {"init", "-q"});
  write(repo / "CMakeLists.txt", kCMakeLists);
  write(repo / "foo.cpp", "int main() { return 0; }\n");
  run(repo, {"add", "."});
  run(repo, {"commit", "-q", "-m", "builds"});
  r.good = run(repo, {"rev-parse", "HEAD"});
  write(repo / "foo.cpp", "int main() { return not_declared; }\n");
  run(repo, {"commit", "-q", "-am", "does not build"});
  r.broken = run(repo, {"rev-parse", "HEAD"});
  return r;
}

perfgate::ReferenceBuildOptions options(const Repo& r, const std::string& commit) {
  perfgate::ReferenceBuildOptions o;
  o.source_dir = r.root / "repo";
  o.commit = commit;
  o.root = r.root / "reference";
  o.targets = {"bench_foo"};
  o.use_ccache = false;
  o.jobs = 1;
  return o;
}

}  // namespace

TEST(ReferenceBuild, BuildsARevisionAndReusesIt) {
  const Repo r = make_repo("builds");
  auto o = options(r, r.good);
  o.targets = {"bench_foo", "bench_absent"};
  const auto b = perfgate::build_reference(o);
  EXPECT_FALSE(b.reused);
  EXPECT_TRUE(fs::exists(b.bin_dir / "bench_foo"));
  EXPECT_EQ(b.built_targets, std::vector<std::string>{"bench_foo"});
  EXPECT_EQ(b.missing_targets, std::vector<std::string>{"bench_absent"});
  EXPECT_GT(b.build_seconds, 0);
  const auto again = perfgate::build_reference(o);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.missing_targets, std::vector<std::string>{"bench_absent"});
  // Another suite's target of the same commit is built beside the first, which stays usable.
  o.targets = {"bench_other"};
  const auto other = perfgate::build_reference(o);
  EXPECT_FALSE(other.reused);
  o.targets = {"bench_foo"};
  EXPECT_TRUE(perfgate::build_reference(o).reused);
}

TEST(ReferenceBuild, ARevisionThatDoesNotBuildLeavesNoUsableBuild) {
  const Repo r = make_repo("broken");
  ASSERT_FALSE(perfgate::build_reference(options(r, r.good)).reused);
  try {
    perfgate::build_reference(options(r, r.broken));
    FAIL() << "a broken revision built";
  } catch (const ReferenceError& e) {
    EXPECT_EQ(e.kind, ReferenceError::Kind::build_failed);
    EXPECT_NE(std::string(e.what()).find(r.broken.substr(0, 12)), std::string::npos) << e.what();
    ASSERT_FALSE(e.log_file.empty());
    std::ifstream log(e.log_file);
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("not_declared"), std::string::npos) << text;
  }
  // The good revision's marker went before the broken build started: it is rebuilt, not trusted.
  EXPECT_FALSE(fs::exists(r.root / "reference" / "build" / "perfgate-reference.json"));
  const auto b = perfgate::build_reference(options(r, r.good));
  EXPECT_FALSE(b.reused);
  EXPECT_TRUE(fs::exists(b.bin_dir / "bench_foo"));
}

// A CMake project that leaves its executable in the target's own folder, and a build command that writes where
// $PERFGATE_BUILD_DIR says while the reference's folder is given relative to this process's.
TEST(ReferenceBuild, FindsABinaryWhereverTheBuildLeftIt) {
  const Repo r = make_repo("anywhere");
  const fs::path repo = r.root / "repo";
  write(repo / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(anywhere CXX)\nadd_subdirectory(sub)\n");
  write(repo / "sub" / "CMakeLists.txt", "add_executable(my_bench ../foo.cpp)\n");
  write(repo / "foo.cpp", "int main() { return 0; }\n");
  run(repo, {"add", "."});
  run(repo, {"commit", "-q", "-m", "plain layout"});
  auto o = options(r, run(repo, {"rev-parse", "HEAD"}));
  o.targets = {"my_bench", "bench_absent"};
  const auto b = perfgate::build_reference(o);
  ASSERT_EQ(b.binaries.count("my_bench"), 1u);
  EXPECT_EQ(b.binaries.at("my_bench"), b.build_dir / "sub" / "my_bench");
  EXPECT_EQ(b.missing_targets, std::vector<std::string>{"bench_absent"});
  EXPECT_EQ(perfgate::build_reference(o).binaries.at("my_bench"), b.build_dir / "sub" / "my_bench");  // reused

  o.root = fs::relative(r.root / "command", fs::current_path());
  ASSERT_TRUE(o.root.is_relative());
  o.build_command = "c++ foo.cpp -o \"$PERFGATE_BUILD_DIR/my_bench\"";
  const auto c = perfgate::build_reference(o);
  ASSERT_EQ(c.binaries.count("my_bench"), 1u);
  EXPECT_TRUE(fs::equivalent(c.binaries.at("my_bench"), r.root / "command" / "build" / "my_bench"));
  EXPECT_EQ(c.missing_targets, std::vector<std::string>{"bench_absent"});
}

TEST(ReferenceBuild, ACheckoutWithoutCMakeNamesTheBuildCommandFlag) {
  const Repo r = make_repo("no_cmake");
  const fs::path repo = r.root / "repo";
  run(repo, {"rm", "-q", "CMakeLists.txt"});
  write(repo / "Makefile", "all:\n\tc++ foo.cpp -o bench_foo\n");
  write(repo / "foo.cpp", "int main() { return 0; }\n");
  run(repo, {"add", "."});
  run(repo, {"commit", "-q", "-m", "a Makefile"});
  auto o = options(r, run(repo, {"rev-parse", "HEAD"}));
  o.build_command_flag = "--reference-build-command";
  try {
    perfgate::build_reference(o);
    FAIL() << "a checkout without CMakeLists.txt configured";
  } catch (const ReferenceError& e) {
    EXPECT_EQ(e.kind, ReferenceError::Kind::build_failed);
    EXPECT_NE(std::string(e.what()).find("it has no CMakeLists.txt: give the command that builds it with "
                                         "--reference-build-command"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReferenceBuild, UnknownRevisionAndShallowCloneSaySo) {
  const Repo r = make_repo("revisions");
  EXPECT_EQ(perfgate::resolve_revision(r.root / "repo", "HEAD~1"), r.good);
  try {
    perfgate::resolve_revision(r.root / "repo", "no-such-branch");
    FAIL();
  } catch (const ReferenceError& e) {
    EXPECT_EQ(e.kind, ReferenceError::Kind::unknown_revision);
    EXPECT_NE(std::string(e.what()).find("'no-such-branch'"), std::string::npos) << e.what();
  }
  run(r.root, {"clone", "-q", "--depth", "1", "file://" + (r.root / "repo").string(), "shallow"});
  try {
    perfgate::resolve_revision(r.root / "shallow", r.good);
    FAIL();
  } catch (const ReferenceError& e) {
    EXPECT_NE(std::string(e.what()).find("shallow clone"), std::string::npos) << e.what();
  }
  try {
    perfgate::resolve_revision(r.root, "HEAD");
    FAIL();
  } catch (const ReferenceError& e) { EXPECT_EQ(e.kind, ReferenceError::Kind::not_a_checkout); }
}

TEST(ReferenceBuild, AutomaticReferenceFollowsTheDefaultBranch) {
  const Repo r = make_repo("automatic");
  const fs::path repo = r.root / "repo";
  // On main, clean: the parent.
  auto a = perfgate::automatic_reference(repo);
  EXPECT_EQ(a.commit, r.good) << a.why_none;
  EXPECT_NE(a.description.find("HEAD~1"), std::string::npos) << a.description;
  // On main with uncommitted changes: HEAD itself.
  write(repo / "foo.cpp", "int main() { return 1; }\n");
  a = perfgate::automatic_reference(repo);
  EXPECT_EQ(a.commit, r.broken);
  run(repo, {"checkout", "-q", "--", "foo.cpp"});
  // On a feature branch: the merge base with main.
  run(repo, {"checkout", "-q", "-b", "feature"});
  write(repo / "bar.txt", "x\n");
  run(repo, {"add", "bar.txt"});
  run(repo, {"commit", "-q", "-m", "feature work"});
  a = perfgate::automatic_reference(repo);
  EXPECT_EQ(a.commit, r.broken);
  EXPECT_NE(a.description.find("merge base"), std::string::npos) << a.description;
  // A shallow clone of one commit on its default branch has no parent: no reference, and why.
  run(r.root, {"clone", "-q", "--depth", "1", "file://" + repo.string(), "one"});
  a = perfgate::automatic_reference(r.root / "one");
  EXPECT_TRUE(a.commit.empty());
  EXPECT_NE(a.why_none.find("shallow"), std::string::npos) << a.why_none;
}
