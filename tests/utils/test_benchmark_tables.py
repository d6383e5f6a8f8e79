"""docs/benchmarks.md: every table names its command and a raw file that exists.

A table's own text is what stands between it and the previous heading or
table: it must hold a `Command:` and a path under `benchmarks/results/`, and
every such path anywhere in the page must exist in the repository.
"""

import os
import re

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
PAGE = os.path.join(REPO, "docs", "benchmarks.md")
RAW_FILE = re.compile(r"benchmarks/results/[\w.\-]+")


def tables(text):
    """`(heading, preamble)` of each Markdown table in `text`."""
    found, heading, preamble, in_table = [], None, [], False
    for line in text.splitlines():
        if line.startswith("|"):
            if not in_table:
                found.append((heading, "\n".join(preamble)))
                preamble, in_table = [], True
            continue
        in_table = False
        if line.startswith("#"):
            heading, preamble = line.lstrip("# "), []
        else:
            preamble.append(line)
    return found


def problems(text, repo):
    """What is wrong with the page `text`: one message per fault."""
    found = []
    for heading, preamble in tables(text):
        if "Command:" not in preamble:
            found.append(f"{heading}: a table without its command")
        if not RAW_FILE.search(preamble):
            found.append(f"{heading}: a table without a raw file")
    for path in sorted(set(RAW_FILE.findall(text))):
        if not os.path.isfile(os.path.join(repo, path)):
            found.append(f"{path} does not exist")
    return found


def test_every_table_cites_its_command_and_an_existing_raw_file():
    with open(PAGE) as f:
        text = f.read()
    assert len(tables(text)) >= 10
    assert problems(text, REPO) == []


def test_a_table_without_command_or_raw_file_is_caught(tmp_path):
    os.makedirs(tmp_path / "benchmarks" / "results")
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{}")
    table = "| case | ms |\n| --- | ---: |\n| x | 1 |\n"
    page = (
        "## Cited\n\nCommand: `python a.py`. Raw: "
        "[`a.json`](../benchmarks/results/a.json).\n\n" + table + "\n"
        "## Bare\n\nSome prose.\n\n" + table + "\n"
        "## Missing\n\nCommand: `python b.py`. Raw: "
        "[`b.json`](../benchmarks/results/b.json).\n\n" + table
    )
    assert problems(page, str(tmp_path)) == [
        "Bare: a table without its command",
        "Bare: a table without a raw file",
        "benchmarks/results/b.json does not exist",
    ]
