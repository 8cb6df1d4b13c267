#!/usr/bin/env python3
"""check_lab_separation.py: which lines name lab/ (prose, code, scripts) and which may (Markdown links)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_lab_separation import offending_lines  # noqa: E402


class OffendingLines(unittest.TestCase):
    def test_script_paths_into_the_lab_are_found(self):
        text = "source lab/tools/lab_common.sh\nci/perf.sh\nx=../lab/records\n"
        self.assertEqual([n for n, _ in offending_lines(text, markdown=False)], [1, 3])

    def test_markdown_links_to_the_lab_are_allowed_but_prose_paths_are_not(self):
        text = ("Measured: [the record](../lab/results/x.md#a).\n"
                "Run `lab/tools/record_sessions.sh` first.\n"
                "[ref]: ../lab/results/y.md\n")
        self.assertEqual([n for n, _ in offending_lines(text, markdown=True)], [2])

    def test_words_ending_in_lab_are_not_paths(self):
        text = "gitlab/ and collab/ and ci/gitlab/perfgate.yml\n"
        self.assertEqual(list(offending_lines(text, markdown=False)), [])


if __name__ == "__main__":
    unittest.main()
