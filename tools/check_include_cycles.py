#!/usr/bin/env python3
"""Fails (exit 1) when the components of a C++ library include each other in a cycle.

A component is one header under include/<project>/ together with the sources that implement it, so a
cycle between components is a cycle in what depends on what, even when no header includes itself
(a.cpp includes b.hpp and b.cpp includes a.hpp is one). The component of a file is:
  - include/<project>/NAME.hpp, src/**/NAME.cpp and src/**/NAME.hpp: NAME, when a public header NAME exists;
  - else src/**/PREFIX_rest.cpp (report_json.cpp, report_internal.hpp): PREFIX, when a public header PREFIX exists;
  - else a file in src/**/FOLDER/ (history/sqlite_store.cpp): FOLDER, when a public header FOLDER exists;
  - else the file's own stem.
Edges come from the `#include "..."` lines. Usage: check_include_cycles.py LIBRARY_ROOT [PROJECT]
(LIBRARY_ROOT holds include/ and src/; PROJECT defaults to perfgate). Prints the components and, on
failure, each cycle found.
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = {".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh"}


def component_of(path: pathlib.Path, public: set) -> str:
    stem = path.stem
    if stem in public:
        return stem
    prefix = stem.split("_", 1)[0]
    if prefix in public:
        return prefix
    for folder in reversed(path.parent.parts):
        if folder in public:
            return folder
    return stem


def build_graph(root: pathlib.Path, project: str) -> dict:
    public_dir = root / "include" / project
    public = {p.stem for p in public_dir.glob("*.hpp")}
    files = [p for p in (root / "include").rglob("*") if p.suffix in SOURCE_SUFFIXES]
    files += [p for p in (root / "src").rglob("*") if p.suffix in SOURCE_SUFFIXES]
    graph = {}
    for f in files:
        source = component_of(f.relative_to(root), public)
        edges = graph.setdefault(source, set())
        for included in INCLUDE.findall(f.read_text(errors="replace")):
            target = component_of(pathlib.Path(included), public)
            if target != source:
                edges.add(target)
    # Only components of this library take part; an include of another library's header is no edge.
    return {c: {t for t in ts if t in graph} for c, ts in graph.items()}


def find_cycles(graph: dict) -> list:
    """One cycle per strongly connected component of more than one node (Tarjan)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                cycles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    project = sys.argv[2] if len(sys.argv) == 3 else "perfgate"
    if not (root / "include" / project).is_dir() or not (root / "src").is_dir():
        print(f"check_include_cycles: {root} has no include/{project}/ and src/", file=sys.stderr)
        return 2
    graph = build_graph(root, project)
    cycles = find_cycles(graph)
    for cycle in cycles:
        details = "; ".join(f"{a} -> {', '.join(sorted(graph[a] & set(cycle)))}" for a in cycle)
        print(f"check_include_cycles: cycle between {', '.join(cycle)} ({details})")
    if cycles:
        return 1
    print(f"check_include_cycles: {len(graph)} components of {root}, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
