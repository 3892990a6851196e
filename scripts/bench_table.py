#!/usr/bin/env python3
"""Renders the tables of docs/benchmarks.md from the result files in bench/results/*.json.

Each result file holds {"table": ID, "rows": [...]}; a row has date, machine, measured, figure,
command and, where it was measured beside something, reference, reference_figure,
reference_command and ratio. The page marks where each table goes:

    <!-- bench-table: ID -->
    ...generated...
    <!-- /bench-table -->

    python3 scripts/bench_table.py          rewrite docs/benchmarks.md's tables
    python3 scripts/bench_table.py --check  exit 1 if the page is not what the files render

Standard library only (scripts/test.sh runs the check).
"""
import glob, json, os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
REQUIRED = ["date", "machine", "measured", "figure", "command"]
MARKER = re.compile(r"(<!-- bench-table: ([\w-]+) -->\n)(.*?)(<!-- /bench-table -->)", re.S)


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def load():
    tables = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*.json"))):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        name = os.path.relpath(path, ROOT)
        for i, row in enumerate(data["rows"]):
            missing = [k for k in REQUIRED if not row.get(k)]
            if missing:
                sys.exit(f"bench_table: {name} row {i}: missing {', '.join(missing)}")
            if row.get("reference") and not (row.get("reference_figure") and row.get("ratio")):
                sys.exit(f"bench_table: {name} row {i}: a reference needs reference_figure and ratio")
            tables.setdefault(data["table"], []).append((row, name))
    return tables


def render(rows):
    out = [
        "| measured | figure | reference | reference's figure | ratio | date | machine | commands |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    # Newest first; rows of one date keep their order in the file.
    for row, name in sorted(rows, key=lambda r: r[0]["date"], reverse=True):
        cmds = row["command"]
        if row.get("reference_command"):
            cmds += f"; reference: {row['reference_command']}"
        out.append("| " + " | ".join(cell(x) for x in [
            row["measured"], row["figure"], row.get("reference", "–"), row.get("reference_figure", "–"),
            row.get("ratio", "–"), row["date"], row["machine"], f"{cmds} ([data](../{name}))",
        ]) + " |")
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    tables = load()
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    seen = set()

    def sub(m):
        tid = m.group(2)
        if tid not in tables:
            sys.exit(f"bench_table: docs/benchmarks.md has a table {tid!r} that no result file fills")
        seen.add(tid)
        return m.group(1) + render(tables[tid]) + m.group(4)

    new = MARKER.sub(sub, page)
    unused = sorted(set(tables) - seen)
    if unused:
        sys.exit(f"bench_table: no place in docs/benchmarks.md for the table(s) {', '.join(unused)}")
    if check:
        if new != page:
            sys.exit("bench_table: docs/benchmarks.md is out of date: run python3 scripts/bench_table.py")
        print("bench_table: docs/benchmarks.md is up to date")
    elif new != page:
        with open(PAGE, "w", encoding="utf-8") as f:
            f.write(new)
        print("bench_table: docs/benchmarks.md rewritten")


if __name__ == "__main__":
    main()
