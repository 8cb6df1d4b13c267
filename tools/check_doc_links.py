#!/usr/bin/env python3
"""Checks that every relative link and #anchor in the repository's Markdown resolves.

Pages: README.md, docs/*.md and, when present, lab/**/*.md (or the files and folders named on the command
line, relative to ROOT). A link resolves when its target file or folder exists; an anchor when the target
page has a heading whose GitHub anchor is that fragment (lowercase; punctuation other than '-' and '_'
removed; spaces become '-'; repeated headings get -1, -2, ...) or an explicit <a name/id="...">.
Links with a scheme (https:, mailto:) and links inside code are not checked, nor links into lab/ when lab/ was
deleted (the product stands without it).

  tools/check_doc_links.py ROOT [PAGE_OR_FOLDER ...]

Exit 0 all resolve; 1 lists each broken link as FILE:LINE: LINK (why); 2 bad arguments.
"""
import os
import re
import sys

LINK = re.compile(r"(?<!\\)!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def github_anchor(heading):
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading)              # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.replace("`", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(text, blank_code=True):
    """(line number, line) of the lines outside fenced code blocks, inline code blanked unless told."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if opening:
            marker = opening.group(1)
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is None:
            yield number, INLINE_CODE.sub("", line) if blank_code else line


def anchors_of(path, cache):
    if path not in cache:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read(), blank_code=False):
                found.update(a for a in HTML_ANCHOR.findall(line))
                heading = HEADING.match(line)
                if not heading:
                    continue
                base = github_anchor(heading.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def links_of(text):
    for number, line in prose_lines(text):
        for match in LINK.finditer(line):
            yield number, match.group(1)
        reference = REFERENCE.match(line)
        if reference:
            yield number, reference.group(1)


def in_deleted_lab(path, root):
    """A path into lab/ of a tree whose lab/ was deleted: the product stands without it, so such a link may dangle."""
    lab = os.path.join(root, "lab")
    return not os.path.isdir(lab) and os.path.commonpath([os.path.abspath(path), os.path.abspath(lab)]) == \
        os.path.abspath(lab)


def check_link(page, target, cache, root="."):
    """None when the link resolves, else why not."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return None
    path_part, _, fragment = target.partition("#")
    path = page if not path_part else os.path.normpath(os.path.join(os.path.dirname(page), path_part))
    if in_deleted_lab(path, root):
        return None
    if not os.path.exists(path):
        return "no such file"
    if fragment and path.endswith(".md") and os.path.isfile(path):
        if fragment.lower() not in anchors_of(path, cache):
            return f"no heading #{fragment} in {os.path.basename(path)}"
    return None


def pages_under(root, names):
    for name in names:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            yield path
        elif os.path.isdir(path):
            for folder, _, files in sorted(os.walk(path)):
                yield from (os.path.join(folder, f) for f in sorted(files) if f.endswith(".md"))


def default_pages(root):
    names = ["README.md", "docs"]
    if os.path.isdir(os.path.join(root, "lab")):
        names.append("lab")
    pages = list(pages_under(root, names))
    # docs/ holds its pages at the top level; its subfolders hold inputs (the example pages' intro fragments, whose
    # links are resolved where the generator puts them: in the page they open)
    # lab/records/ holds raw files (stored reports among them, whose links pointed into the run that wrote them)
    pages = [p for p in pages if not os.path.relpath(p, root).startswith(os.path.join("lab", "records", ""))]
    return [p for p in pages if not os.path.relpath(p, root).startswith(os.path.join("docs", ""))
            or os.path.dirname(os.path.relpath(p, root)) == "docs"]


def main(argv):
    if len(argv) < 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    pages = list(pages_under(root, argv[2:])) if len(argv) > 2 else default_pages(root)
    cache = {}
    broken = 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for number, target in links_of(text):
            why = check_link(page, target, cache, root)
            if why:
                broken += 1
                print(f"{os.path.relpath(page, root)}:{number}: {target} ({why})")
    print(f"{len(pages)} pages, {broken} broken links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
