#!/usr/bin/env python3
"""session_archives.session_roots against real archives: a good one, one with an unsafe path, a link, and a path
that is neither a folder nor an archive (ctest unit.tools.session_archives)."""
import io
import os
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from session_archives import session_roots  # noqa: E402


def write_archive(path, entries):
    """entries: [(name, bytes or None for a symbolic link to /etc/passwd)]"""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))


class SessionRoots(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_an_archive_is_unpacked_once_and_a_folder_is_kept(self):
        archive = os.path.join(self.dir, "sessions.tgz")
        write_archive(archive, [("./aa-m1/session.txt", b"label=aa\n"), ("./aa-m1/runs/s.current.json", b"{}")])
        scratch = os.path.join(self.dir, "scratch")
        [root] = session_roots([archive], scratch)
        with open(os.path.join(root, "aa-m1", "session.txt")) as f:
            self.assertEqual(f.read(), "label=aa\n")
        self.assertEqual(session_roots([archive], scratch), [root])
        self.assertEqual(session_roots([self.dir], scratch), [self.dir])

    def test_a_path_leaving_the_folder_is_refused(self):
        archive = os.path.join(self.dir, "bad.tgz")
        write_archive(archive, [("../escape.txt", b"x")])
        with self.assertRaises(SystemExit) as e:
            session_roots([archive], os.path.join(self.dir, "scratch"))
        self.assertIn("unsafe or unexpected entry '../escape.txt'", str(e.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "escape.txt")))

    def test_a_link_is_refused(self):
        archive = os.path.join(self.dir, "link.tgz")
        write_archive(archive, [("./aa-m1/runs", None)])
        with self.assertRaises(SystemExit) as e:
            session_roots([archive], os.path.join(self.dir, "scratch"))
        self.assertIn("'./aa-m1/runs'", str(e.exception))

    def test_neither_folder_nor_archive_names_the_path(self):
        with self.assertRaises(SystemExit) as e:
            session_roots([os.path.join(self.dir, "missing.json")], self.dir)
        self.assertIn("missing.json: neither a folder of sessions nor a session archive", str(e.exception))


if __name__ == "__main__":
    unittest.main()
