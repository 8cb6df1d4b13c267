#!/usr/bin/env python3
"""Checks function sizes in C++ and CUDA sources that clang-tidy does not reach: the `.cu` files.

The `lint` target runs clang-tidy's readability-function-size over the C++ sources (.clang-tidy). The
CUDA sources compile with nvcc, whose command lines clang-tidy cannot replay, so this check stands in for it
there: it counts a function's statements the way the clang-tidy check does, approximately (each statement
in a block, lambdas' included; an if, for, while or switch twice, for itself and its condition), against the
same StatementThreshold, read from .clang-tidy. A function that must stay long (a hand-written kernel) is
exempted as for clang-tidy: `// NOLINT(readability-function-size)` on a line of its signature, or
`// NOLINTNEXTLINE(readability-function-size)` on the line before, with a line saying why.

  tools/check_function_size.py ROOT PATH... [--ext .cu,.cuh] [--threshold N] [--list]

PATH: folders or files under ROOT. --list prints every function's count, not only those over the limit.
Exit 0 none over; 1 lists each FILE:LINE: FUNCTION (N statements, limit M); 2 bad arguments.
"""
import argparse
import os
import re
import sys

EXEMPT = "readability-function-size"
SCOPE_HEADER = re.compile(r'(?:^|[\s>])(namespace|class|struct|union|enum)\b[^()]*$|extern\s*"\s*"\s*$')
TRAILER = re.compile(r"^(?:\s|const\b|volatile\b|noexcept\b(?:\s*\([^()]*\))?|override\b|final\b|mutable\b|&&?|"
                     r"->\s*[\w:<>,*&\s]+)*$")
CONTROL = re.compile(r"\b(if|for|while|switch)\b")
CASE = re.compile(r"\b(case\b|default\s*:)")


def threshold_from_clang_tidy(root):
    try:
        with open(os.path.join(root, ".clang-tidy"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"readability-function-size\.StatementThreshold\s*\n\s*value:\s*'?(\d+)", text)
    return int(m.group(1)) if m else None


def strip(text):
    """The code with comments, strings and character literals blanked (newlines kept), and the lines whose
    comments exempt a function."""
    out, exempt_lines, nextline = [], set(), set()
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            end = i
            while True:  # a preprocessor line, with its continuations
                end = text.find("\n", end)
                end = n if end < 0 else end
                if end == n or text[end - 1] != "\\":
                    break
                end += 1
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            line += text.count("\n", i, end)
            i = end
        elif text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i + 2) + 2
            end = n if end < (2 if text[i + 1] == "*" else 0) else end
            comment = text[i:end]
            if EXEMPT in comment:
                (nextline if "NOLINTNEXTLINE" in comment else exempt_lines).add(line)
            out.append(re.sub(r"[^\n]", " ", comment))
            line += comment.count("\n")
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            literal = text[i:j + 1]
            out.append(c + re.sub(r"[^\n]", " ", literal[1:-1]) + c)
            line += literal.count("\n")
            i = j + 1
        else:
            out.append(c)
            line += c == "\n"
            i += 1
    return "".join(out), exempt_lines, {k + 1 for k in nextline}


def matching(code, i, open_ch, close_ch):
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_ch:
            depth += 1
        elif code[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def statement_macros(files):
    """NAME -> the statements a call of a function-like macro adds beyond its own (clang-tidy counts the
    expansion: PERFGATE_CUDA_CHECK's do/while is six), from every #define in the files."""
    macros = {}
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().replace("\\\n", " ")
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)\([^)]*\)(.*)$", text, re.M):
            body = strip(m.group(2))[0]
            if "{" in body or ";" in body:
                macros[m.group(1)] = max(count_statements(body, {}) - 1, 0)
    return macros


def count_statements(body, macros):
    """Semicolons that end statements (not those of a for's header), in every block of the body, lambdas'
    included, plus the branches and what statement macros expand to."""
    semicolons, parens = 0, [0]  # open parentheses, per open brace
    for ch in body:
        if ch == "(":
            parens[-1] += 1
        elif ch == ")":
            parens[-1] -= 1
        elif ch == "{":
            parens.append(0)
        elif ch == "}" and len(parens) > 1:
            parens.pop()
        elif ch == ";" and parens[-1] == 0:
            semicolons += 1
    expanded = sum(macros.get(name, 0) for name in re.findall(r"\b(\w+)\s*\(", body))
    return semicolons + 2 * len(CONTROL.findall(body)) + len(CASE.findall(body)) + expanded


def function_name(header):
    header = re.sub(r"__launch_bounds__\s*\([^()]*\)|__attribute__\s*\(\(.*?\)\)", " ", header)
    head = header[:header.find("(")] if "(" in header else header
    words = re.findall(r"[~\w:]+(?:\s*operator\s*\S+)?", head)
    return words[-1] if words else "?"


def is_function(header):
    """Whether a declaration-scope brace opens a function body: a parameter list ends the header, followed only
    by qualifiers, and it is no initializer (`= {`)."""
    if "(" not in header or ")" not in header:
        return False
    close = header.rfind(")")
    return TRAILER.match(header[close + 1:]) is not None and not re.search(r"(?<![=!<>])=\s*$", header[:close])


def functions(code):
    """(header start, name, body start, body end) for every function defined at declaration scope (namespaces,
    classes, extern "C"); lambdas and local classes count towards the function that holds them."""
    i, n, boundary = 0, len(code), 0
    while i < n:
        c = code[i]
        if c in ";}":
            boundary = i + 1
        elif c == "{":
            flat = " ".join(code[boundary:i].split())
            prev = code[:i].rstrip()[-1:]
            ctor_init = re.search(r"\)[^()]*[^:]:[^:]", flat) is not None
            if SCOPE_HEADER.search(flat) and "(" not in flat:
                boundary = i + 1  # a scope: what it holds is again declarations
                i += 1
                continue
            end = matching(code, i, "{", "}")
            if is_function(flat) or (ctor_init and not (prev.isalnum() or prev in "_>")):
                yield boundary, function_name(flat), i, end
                boundary = end + 1
            elif not ctor_init:
                boundary = end + 1  # an initializer, or a brace this check does not know: skipped whole
            i = end + 1  # (a constructor's member initializer in braces, `x_{a}`, leaves the header open)
            continue
        i += 1


def check_file(path, threshold, listing, macros):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    code, exempt_lines, nextline_lines = strip(text)
    found = []
    for header_start, name, start, end in functions(code):
        header = code[header_start:start]
        first = code.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
        last = code.count("\n", 0, start) + 1
        statements = count_statements(code[start + 1:end], macros)
        exempt = first in nextline_lines or any(k in exempt_lines for k in range(first, last + 1))
        if listing:
            print(f"{path}:{first}: {name} {statements}{' (exempt)' if exempt else ''}")
        if statements > threshold and not exempt:
            found.append((first, name, statements))
    return found


def source_files(root, paths, exts):
    for p in paths:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            yield full
            continue
        for folder, dirs, names in os.walk(full):
            dirs.sort()
            for name in sorted(names):
                if os.path.splitext(name)[1] in exts:
                    yield os.path.join(folder, name)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--ext", default=".cu,.cuh")
    parser.add_argument("--threshold", type=int)
    parser.add_argument("--list", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        return 2
    threshold = args.threshold or threshold_from_clang_tidy(args.root)
    if threshold is None:
        print("no readability-function-size.StatementThreshold in .clang-tidy; pass --threshold", file=sys.stderr)
        return 2
    exts = set(args.ext.split(","))
    macros = statement_macros(source_files(args.root, args.paths, {".h", ".hpp", ".cuh", ".cpp", ".cu"}))
    over = []
    for path in source_files(args.root, args.paths, exts):
        for line, name, statements in check_file(path, threshold, args.list, macros):
            over.append(f"{os.path.relpath(path, args.root)}:{line}: {name} ({statements} statements, limit {threshold})")
    for o in over:
        print(o)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
