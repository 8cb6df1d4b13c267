#!/usr/bin/env python3
"""The harness as a house of rooms on floors: checks that no include goes up a floor, and draws the house.

A room is a folder of harness/src/ (io, stats, exec, analysis, ...) or harness/cli/. A public header
include/perfgate/NAME.hpp belongs to the room of the source that implements it (src/<room>/NAME.cpp, or
src/<room>/NAME_*.cpp), or, for a header without a source, to the room HEADER_ROOMS names. A file may include
headers of its own room and of rooms on lower floors; an include of a room on its own floor or above is a
door that opens backwards.

  tools/house.py check HARNESS_ROOT      exit 1 listing every backward include (FILE: includes HEADER (room
                                         X, floor N) from room Y, floor M); exit 2 on a file of no known room
  tools/house.py draw HARNESS_ROOT [PAGE]  the house as Markdown: floors, rooms, their files and lines, the
                                         includes between rooms, and the backward ones; with PAGE, written
                                         into it between the lines <!-- house:begin --> and <!-- house:end -->

HARNESS_ROOT holds include/perfgate/, src/ and cli/.
"""
import collections
import pathlib
import re
import sys

# Lowest first. A room may include its own headers and those of rooms on lower floors only.
FLOORS = [
    ["io", "stats", "exec"],  # the model and its loader; statistics; child processes and bench binaries
    ["analysis"],             # comparisons and the analyses behind a verdict, differential profiles
    ["baseline"],             # machine classes, the baseline store, gate plans, reference builds
    ["history"],              # the results history: stores, change points, shard plans and merges
    ["report"],               # every renderer: terminal, Markdown, JSON, JUnit, the dashboard's HTML
    ["run"],                  # measuring: the runner, sessions, bisection, profiler runs
    ["cli"],                  # the perfgate command: flags, environment, terminal
]
# Public headers with no source of their own.
HEADER_ROOMS = {
    "history": "history",       # the store's interface and types
    "record": "report",         # the computed result of a record-only run, which the reporters print
    "gpu_counters": "analysis", # the counter names cycle space and the throttled repetitions read
    "observer": "run",          # what a running measurement reports to its caller
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
SOURCES = {".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh"}


def floor_of():
    return {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def source_files(root):
    for part in ("include", "src", "cli"):
        yield from sorted(p for p in (root / part).rglob("*") if p.suffix in SOURCES)


def public_header_rooms(root):
    """NAME -> room for every include/perfgate/NAME.hpp."""
    implementations = {}
    for source in sorted((root / "src").rglob("*.cpp")):
        implementations.setdefault(source.stem, source.parent.relative_to(root / "src").parts[0])
    rooms = {}
    for header in sorted((root / "include" / "perfgate").glob("*.hpp")):
        name = header.stem
        if name in implementations:
            rooms[name] = implementations[name]
        elif name in HEADER_ROOMS:
            rooms[name] = HEADER_ROOMS[name]
        else:
            prefixed = [room for stem, room in implementations.items() if stem.startswith(name + "_")]
            rooms[name] = prefixed[0] if prefixed else None
    return rooms


def room_of_file(path, root, header_rooms):
    relative = path.relative_to(root)
    if relative.parts[0] == "cli":
        return "cli"
    if relative.parts[0] == "src":
        return relative.parts[1]
    return header_rooms.get(path.stem)


def room_of_include(included, including, root, header_rooms):
    """The room of an included header, or None for a header of another library."""
    target = pathlib.Path(included)
    if target.parts[0] == "perfgate" and len(target.parts) == 2:
        return header_rooms.get(target.stem)
    for base in (including.parent, root / "src"):  # "x.hpp" beside the file, or "room/x.hpp" from src/
        candidate = base / target
        if candidate.exists():
            return room_of_file(candidate.resolve(), root.resolve(), header_rooms)
    return None


def includes(root):
    """(file, its room, included header, the header's room) for every include of a harness header."""
    header_rooms = public_header_rooms(root)
    for path in source_files(root):
        room = room_of_file(path, root, header_rooms)
        for included in INCLUDE.findall(path.read_text(errors="replace")):
            target = room_of_include(included, path, root, header_rooms)
            if target is not None:
                yield path.relative_to(root), room, included, target


def unknown_rooms(root):
    header_rooms = public_header_rooms(root)
    floors = floor_of()
    for path in source_files(root):
        room = room_of_file(path, root, header_rooms)
        if room not in floors:
            yield path.relative_to(root), room


def backward(root):
    floors = floor_of()
    for path, room, included, target in includes(root):
        if target != room and floors[target] >= floors[room]:
            yield path, room, included, target


def check(root):
    unknown = list(unknown_rooms(root))
    for path, room in unknown:
        print(f"{path}: in no room of tools/house.py's FLOORS (room {room!r}): add it to a floor")
    if unknown:
        return 2
    floors = floor_of()
    doors = list(backward(root))
    for path, room, included, target in doors:
        print(f"{path}: includes {included} (room {target}, floor {floors[target]}) "
              f"from room {room}, floor {floors[room]}")
    print(f"{len(doors)} include(s) going up a floor", file=sys.stderr)
    return 1 if doors else 0


def room_sizes(root):
    header_rooms = public_header_rooms(root)
    sizes = collections.defaultdict(lambda: [0, 0])
    for path in source_files(root):
        size = sizes[room_of_file(path, root, header_rooms)]
        size[0] += 1
        size[1] += len(path.read_text(errors="replace").splitlines())
    return sizes


def drawing(root):
    floors = floor_of()
    sizes = room_sizes(root)
    edges = collections.Counter((room, target) for _, room, _, target in includes(root) if room != target)
    doors = list(backward(root))
    out = ["| floor | room | files | lines | includes (headers of) |", "| ---: | --- | ---: | ---: | --- |"]
    for level in reversed(range(len(FLOORS))):
        for room in FLOORS[level]:
            below = sorted((t for (r, t) in edges if r == room), key=lambda t: (-floors[t], t))
            text = ", ".join(f"{t} ({edges[(room, t)]})" for t in below) or "nothing"
            files, lines = sizes.get(room, (0, 0))
            out.append(f"| {level} | `{room}` | {files} | {lines} | {text} |")
    out.append("")
    out.append(f"Includes going up a floor: **{len(doors)}**" + (":" if doors else "."))
    out.extend(f"- `{path}` includes `{included}` (room `{target}`) from room `{room}`"
               for path, room, included, target in doors)
    return "\n".join(out)


BEGIN, END = "<!-- house:begin -->", "<!-- house:end -->"


def draw(root, page=None):
    text = drawing(root)
    if page is None:
        print(text)
        return 0
    content = page.read_text()
    if content.count(BEGIN) != 1 or content.count(END) != 1 or content.index(BEGIN) > content.index(END):
        print(f"{page}: needs one line {BEGIN} and, after it, one line {END}", file=sys.stderr)
        return 2
    head, rest = content.split(BEGIN)
    page.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    return 0


def main(argv):
    usable = len(argv) == 3 or (len(argv) == 4 and argv[1] == "draw")
    if not usable or argv[1] not in ("check", "draw") or not (pathlib.Path(argv[2]) / "src").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[2])
    if argv[1] == "check":
        return check(root)
    return draw(root, pathlib.Path(argv[3]) if len(argv) == 4 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
