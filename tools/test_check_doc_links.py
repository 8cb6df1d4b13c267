#!/usr/bin/env python3
"""check_doc_links.py against pages with known good and broken links, and GitHub's anchor rules."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_doc_links  # noqa: E402


def write(root, name, text):
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run(root, *pages):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = check_doc_links.main(["check_doc_links.py", root, *pages])
    return code, out.getvalue().splitlines()


class Anchors(unittest.TestCase):
    def test_github_rules(self):
        self.assertEqual(check_doc_links.github_anchor("2. CMake: `perfgate_add_suite`"), "2-cmake-perfgate_add_suite")
        self.assertEqual(check_doc_links.github_anchor("Which gate a run uses: stored baseline, reference build, or none"),
                         "which-gate-a-run-uses-stored-baseline-reference-build-or-none")
        self.assertEqual(check_doc_links.github_anchor("The [rule](x.md) (p < 0.05)"), "the-rule-p--005")


class Links(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        write(self.root, "docs/target.md", "# Title\n\n## Same\n\n## Same\n\n<a name=\"custom\"></a>\n")
        write(self.root, "docs/sub/file.txt", "x\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_resolving_links_pass(self):
        write(self.root, "README.md",
              "[t](docs/target.md) [a](docs/target.md#same-1) [c](docs/target.md#custom) [d](docs/sub/)\n"
              "[self](#top) [web](https://example.com/missing) `[code](missing.md)`\n\n# Top\n\n"
              "```\n[fenced](missing.md)\n```\n[ref]: docs/sub/file.txt\n")
        self.assertEqual(run(self.root, "README.md"), (0, []))

    def test_missing_file_and_anchor_are_named_with_their_line(self):
        write(self.root, "docs/page.md", "# Page\n\n[gone](gone.md)\nok [t](target.md#same)\n[bad](target.md#same-2)\n")
        code, lines = run(self.root, "docs")
        self.assertEqual(code, 1)
        self.assertEqual(lines, ["docs/page.md:3: gone.md (no such file)",
                                 "docs/page.md:5: target.md#same-2 (no heading #same-2 in target.md)"])

    def test_links_into_a_deleted_lab_may_dangle_but_not_into_a_present_one(self):
        write(self.root, "README.md", "[figures](lab/results/gone.md#x) [page](docs/gone.md)\n")
        self.assertEqual(run(self.root, "README.md"), (1, ["README.md:1: docs/gone.md (no such file)"]))
        os.makedirs(os.path.join(self.root, "lab"))
        self.assertEqual(run(self.root, "README.md")[1][0], "README.md:1: lab/results/gone.md#x (no such file)")

    def test_bad_root_is_a_usage_error(self):
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(check_doc_links.main(["check_doc_links.py", os.path.join(self.root, "none")]), 2)


if __name__ == "__main__":
    unittest.main()
