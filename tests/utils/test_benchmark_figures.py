"""docs/benchmarks.md and the README's step times follow from the raw files.

For each raw file a section of the page cites, benchmarks/figures.py
computes the table and the phrases of the text (settings, load, date,
findings); the section must hold the table verbatim and every phrase. What
is left of the section once they, the code spans and `NOT_RESULTS` are
taken out must hold no number: a number typed by hand fails. A numeric flag
of a command must be the one the raw file records, and a date the file
does not record must be that of the last commit that changed it. A raw
file with one figure changed fails the check.
"""

import functools
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import figures  # noqa: E402

PAGE = os.path.join(REPO, "docs", "benchmarks.md")
README = os.path.join(REPO, "README.md")
RESULTS = os.path.join(REPO, "benchmarks", "results")
RAW_FILE = re.compile(r"benchmarks/results/([\w.\-]+)")
# Sections checked elsewhere: tests/utils/test_benchmark_tables.py
# regenerates its table with runtime_latency.py --table_from.
CHECKED_ELSEWHERE = ("ONNX Runtime and LiteRT",)
# Raw files the page does not cite: their table went, the file stays.
UNCITED = {"finetune_step.json"}
# Numbers of the page that are not results: the machines' software, the
# chip's datasheet peak, the DIET paper's figures.
NOT_RESULTS = (
    "2-core",
    "TensorFlow 2.21.0, TF-Text 2.21.1, Keras 3.15.1, keras-hub 0.32.0",
    "JAX 0.11.2 (CUDA 13)",
    "989 TFLOP/s",
    "(DIET's Table 1, TPU v2: +24% / +65% at small, +13% / +33% at base)",
)
# A digit not inside a name (float16, H100, WikiText-2).
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)\d")
DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
FLAG = re.compile(r"--(\w+)=([^\s`]+)")


def _flat(text):
    return " ".join(text.split())


def sections(text):
    """[(heading, text)] of the page's '## ' sections, the intro first."""
    parts = re.split(r"^## ", text, flags=re.M)
    return [("intro", parts[0])] + [
        (part.splitlines()[0], part) for part in parts[1:]
    ]


def recorded_flags(path):
    """{flag: value} the raw file records (its flags, command or output)."""
    with open(path) as f:
        text = f.read()
    found = dict(FLAG.findall(text))
    if path.endswith(".json"):
        raw = json.loads(text)
        found = dict(FLAG.findall(raw.get("command", "")))
        for name, value in raw.get("flags", {}).items():
            if isinstance(value, list):
                value = ",".join(map(str, value))
            found.setdefault(name, str(value))
    return found


@functools.cache
def commit_date(name):
    """The date of the last commit that changed the raw file (None
    outside a full git checkout)."""
    try:
        run = subprocess.run(
            ["git", "log", "-1", "--format=%ad", "--date=short", "--"]
            + [os.path.join("benchmarks", "results", name)],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return run.stdout.strip() or None


def section_problems(heading, text, results):
    """What is wrong with one section of the page."""
    found = []
    names = sorted(set(RAW_FILE.findall(text)))
    prose = _flat("\n".join(l for l in text.splitlines() if l[:1] != "|"))
    functions = figures.figure_functions()
    phrases = []
    for name in names:
        if name not in functions:
            found.append(f"{heading}: no figures for {name}")
            continue
        try:
            shown = functions[name](os.path.join(results, name))
        except Exception as error:  # a malformed raw file
            found.append(f"{name}: unreadable: {error!r}")
            continue
        if shown.table and shown.table not in text:
            found.append(f"{name}: its table is not the page's")
        for phrase in map(_flat, shown.phrases):
            if phrase not in prose:
                found.append(f"{name}: the text lacks {phrase!r}")
            phrases.append(phrase)
    for phrase in sorted(phrases + list(NOT_RESULTS), key=len, reverse=True):
        prose = prose.replace(phrase, " ")
    for command in re.findall(r"`([^`]*python [^`]*)`", prose):
        for flag, value in FLAG.findall(command):
            recorded = [
                record[flag]
                for record in map(
                    recorded_flags,
                    (os.path.join(results, name) for name in names),
                )
                if flag in record
            ]
            if re.search(r"\d", value) and recorded and value not in recorded:
                found.append(f"{heading}: --{flag}={value}, not {recorded}")
    prose = re.sub(r"`[^`]*`|\]\([^)]*\)", " ", prose)
    for date in DATE.findall(prose):
        dates = {commit_date(name) for name in names}
        if None not in dates and date not in dates:
            found.append(f"{heading}: {date} is no raw file's date {dates}")
    prose = DATE.sub(" ", prose)
    for match in NUMBER.finditer(prose):
        context = prose[max(match.start() - 30, 0) : match.start() + 20]
        found.append(f"{heading}: a number typed by hand: {context!r}")
    return found


def problems(page, readme, results):
    """What is wrong with the page and the README, given the raw files in
    `results`: one message per fault."""
    found, cited = [], set()
    for heading, text in sections(page):
        cited.update(RAW_FILE.findall(text))
        if not heading.startswith(CHECKED_ELSEWHERE):
            found += section_problems(heading, text, results)
    for name in sorted(set(os.listdir(results)) - cited - UNCITED):
        found.append(f"{name}: cited nowhere in the page")
    step_times = figures.readme_step_times(
        os.path.join(results, "main_job.json")
    )
    if step_times not in _flat(readme):
        found.append(f"main_job.json: the README lacks {step_times!r}")
    return found


def _read(path):
    with open(path) as f:
        return f.read()


def test_page_and_readme_follow_the_raw_files():
    assert problems(_read(PAGE), _read(README), RESULTS) == []


def test_a_number_typed_by_hand_is_caught(tmp_path):
    page = _read(PAGE).replace(
        "## Reader throughput\n", "## Reader throughput\n\nIt took 3 days.\n"
    )
    (found,) = problems(page, _read(README), RESULTS)
    assert "a number typed by hand" in found and "3 days" in found


def test_export_latency_reads_its_json_record_too(tmp_path):
    printed = os.path.join(RESULTS, "export_latency_9rounds.txt")
    record = tmp_path / "export_latency_9rounds.json"
    record.write_text(json.dumps({"report": _read(printed)}))
    function = figures.figure_functions()["export_latency_9rounds.txt"]
    assert function(str(record)) == function(printed)


def _perturbed(value, factors):
    """`value` with each float scaled by the next of `factors`."""
    if isinstance(value, float):
        return value * next(factors)
    if isinstance(value, dict):
        return {k: _perturbed(v, factors) for k, v in value.items()}
    if isinstance(value, list):
        return [_perturbed(v, factors) for v in value]
    return value


def perturb(path):
    """Rewrites the raw file at `path` with its figures changed."""
    factors = itertools.cycle((1.37, 0.71, 1.13))
    text = _read(path)
    if path.endswith(".json"):
        text = json.dumps(_perturbed(json.loads(text), factors))
    elif path.endswith(".jsonl"):
        text = "\n".join(
            json.dumps(_perturbed(json.loads(line), factors))
            for line in text.splitlines()
        )
    else:
        text = re.sub(
            r"\d+\.(\d+)",
            lambda m: f"{float(m.group()) * 1.37:.{len(m.group(1))}f}",
            text,
        )
    with open(path, "w") as f:
        f.write(text)


CHECKED = sorted(
    name
    for heading, text in sections(_read(PAGE))
    if not heading.startswith(CHECKED_ELSEWHERE)
    for name in RAW_FILE.findall(text)
)


@pytest.mark.parametrize("name", sorted(set(CHECKED)))
def test_a_perturbed_raw_file_fails_the_check(tmp_path, name):
    results = str(tmp_path / "results")
    shutil.copytree(RESULTS, results)
    perturb(os.path.join(results, name))
    found = problems(_read(PAGE), _read(README), results)
    assert any(message.startswith(name) for message in found), found
