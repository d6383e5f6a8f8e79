"""docs/benchmarks.md: every table names its command and a raw file that exists,
and the tables a benchmark regenerates from its raw file are those files'.

A table's own text is what stands between it and the previous heading or
table: it must hold a `Command:` and a path under `benchmarks/results/`, and
every such path anywhere in the page must exist in the repository.
"""

import json
import os
import re
import subprocess
import sys

import pytest

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


# Benchmarks whose docs table is regenerated from each raw file by
# `--table_from`: the page must hold it verbatim.
REGENERATED = {"runtime_latency.py": "runtime_latency_"}


def regenerated_table(script, raw_path):
    run = subprocess.run(
        [sys.executable, script, f"--table_from={raw_path}"],
        cwd=os.path.join(REPO, "benchmarks"),
        env=dict(os.environ, PYTHONPATH=REPO),
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.strip()


@pytest.mark.large
def test_regenerated_tables_are_on_the_page_and_follow_their_raw_file(
    tmp_path,
):
    with open(PAGE) as f:
        text = f.read()
    results = os.path.join(REPO, "benchmarks", "results")
    for script, prefix in REGENERATED.items():
        raw_files = sorted(
            name for name in os.listdir(results) if name.startswith(prefix)
        )
        assert raw_files, prefix
        for name in raw_files:
            path = os.path.join(results, name)
            assert regenerated_table(script, path) in text, name
        # A perturbed raw file gives another table.
        with open(os.path.join(results, raw_files[0])) as f:
            raw = json.load(f)
        first_batch = next(iter(raw["samples"].values()))
        first_case = next(iter(first_batch.values()))
        first_case[0][0] *= 3
        first_case[-1][0] *= 3
        perturbed = tmp_path / raw_files[0]
        perturbed.write_text(json.dumps(raw))
        assert regenerated_table(script, str(perturbed)) not in text
