"""The results page and the README's Results section follow from the records.

Every number the prose of docs/results.md and README's Results section
quotes is either in a block that `scripts/compare.py` writes from the
records (`study_findings`; compared here with a fresh rendering) or in a
phrase this test computes from the committed records, with the
qualitative claims beside them checked against the records too. A number
left over, typed by hand, fails the test.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from data_pipeline import glue
from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_findings_markdown
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_report
from tupe_tf.analysis import study_stats
from tupe_tf.analysis import study_summary
from tupe_tf.analysis.compare import CompareConfig
from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_findings_markdown import evaluation_name
from tupe_tf.training.config import ModelConfig

ROOT = Path(__file__).resolve().parents[2]
# The blocks each document must carry.
BLOCKS = {
    "docs/results.md": ("choice", "details", "reproducibility"),
    "README.md": ("readme",),
}
# Numbers in the prose that are not results of this project: the papers'
# figures, citations, and facts of the model's definition.
NOT_RESULTS = (
    "30% of the steps of TUPE's Fig. 5a",  # the paper's figure
    "pre-trained on 16 GB",  # the papers' corpus
    "(Vaswani et al., 2017)",
    "(bloc97, 2023)",
    "(Chen et al., 2023)",
    "(Peng et al., 2023)",
    "entries up to 1, added to token embeddings of standard deviation 0.02",
)


def _rate(value):
    """1e-3 for 0.001, as the docs write learning rates."""
    return re.sub(r"e-0*(\d)", r"e-\1", f"{value:.0e}")


def _score(value):
    """.766 / -.008: a dev score as the recipe table writes it."""
    text = f"{value:.3f}".replace("0.", ".", 1)
    return ".000" if text == "-.000" else text


class Evidence:
    """The committed records under `root`/docs/results and what they say
    (the study's and, for the choice table, the probes' of
    `config.probe_study`)."""

    def __init__(self, root):
        self.root = Path(root)
        results = self.root / "docs" / "results"
        self.config = CompareConfig(results_dir=str(results))
        # The default settings are the committed study's (else refused).
        study_records.check_study_settings(self.config)
        self.study_dir = Path(self.config.study_results_dir)
        self.records = study_report.load_records(self.config)
        assert self.records.probes, self.config.probe_results_dir
        self.study = self._json(self.study_dir / "study.json")
        self.data = self._json(self.study_dir / "data.json")
        self.budget = [
            self._json(p) for p in sorted(results.glob("budget/*.json"))
        ]
        self.recipe = [
            self._json(p)
            for p in sorted(results.glob("finetune_recipe/*.json"))
        ]
        self.summary = study_summary.pretrain_summary(
            self.config, self.records.pretrain, self.records.order
        )

    @staticmethod
    def _json(path):
        return json.loads(Path(path).read_text())

    def versus(self, variant, reference):
        """`paired_stats.Paired` of `variant`'s final loss minus
        `reference`'s, decided within the findings' family (a family of
        one where the findings have none)."""
        found = self.summary[variant].get("versus", {}).get(reference)
        if found is None:
            finals = {
                v: self.summary[v]["final_by_seed"]
                for v in (variant, reference)
            }
            found = paired_stats.decide(
                {0: paired_stats.paired(finals[variant], finals[reference])}
            )[0]
        return found

    def runs(self, variant):
        return {
            r["seed"]: r
            for r in self.records.pretrain
            if r["variant"] == variant
        }


def _setup_phrases(e):
    s = e.study
    dims = ModelConfig(model_size=s["model_size"]).dims()
    seq, longest = s["seq_length"], max(s["eval_lengths"])
    stats = e.data["stats"]
    tasks = {}
    for r in e.records.finetune:
        tasks.setdefault(r["task"], {})["train"] = r["num_train_examples"]
    for r in e.recipe:
        tasks.setdefault(r["task"], {})["dev"] = r["num_eval_examples"][
            "validation"
        ]
    # The evaluation files are what the docs and the report call them.
    for task, name in (("cola", "out-of-domain"), ("sst2", "test split")):
        assert name in glue.KNOWN_EVAL_FILES[(task, tasks[task]["dev"])]
        assert name in evaluation_name(task)
    extension = {r["length"] for r in e.records.extensions}
    (length,) = extension
    (control_steps,) = {
        r["num_train_steps"]
        for r in e.records.finetune
        if r["variant"] == CONTROL
    }
    tokens = {
        r["global_batch_size"] * r["length"] for r in e.records.extensions
    }
    assert tokens == {
        s["global_batch_size"] * seq
    }  # "the first phase's tokens"
    return [
        f"`{s['model_size']}` ({dims['num_layers']} layers, hidden "
        f"{dims['hidden_dim']}, {dims['num_heads']} heads, feed-forward "
        f"{dims['intermediate_dim']})",
        f"position tables end at {longest}, {longest // seq}x the training length",
        f"length {seq}, batch {s['global_batch_size']}, "
        f"{s['num_train_steps']:,} steps, AdamW with peak "
        f"{_rate(s['learning_rate'])}, {s['warmup_ratio']:.0%} warm-up",
        f"validation every {s['eval_interval']} steps over {s['eval_steps']} batches",
        f"{stats['heldout_documents']} of "
        f"{stats['heldout_documents'] + stats['train_documents']} documents "
        f"({stats['heldout_characters']:,} characters, "
        f"`--heldout_fraction={s['heldout_fraction']:g}`)",
        f"factor = length / {seq}",
        f"initial weights: {control_steps} pre-training steps in its records",
        f"(train {tasks['cola']['train']:,} and {tasks['sst2']['train']:,} "
        "examples)",
        f"CoLA's out-of-domain set ({tasks['cola']['dev']:,}) and SST's test "
        f"split ({tasks['sst2']['dev']:,}), not GLUE's dev splits",
        f"continues from its preset at length {length}",
        f"on shards of length {length}",
        f"these models have seen {s['num_train_steps'] * s['global_batch_size']:,} "
        f"sequences of {seq} tokens",
        f"lengths past {length // seq}x",
    ]


def _budget_phrases(e, text):
    (header,) = re.findall(r"^\| run \|.*\|$", text, flags=re.M)
    steps = [int(c) for c in header.strip("| ").split(" | ")[1:]]
    phrases = [header]
    for run in e.budget:
        losses = dict(zip(run["curve"]["steps"], run["curve"]["val_loss"]))
        assert set(steps) <= set(run["curve"]["steps"]) or not run["finished"]
        cells = [f"{losses[n]:.3f}" if n in losses else "-" for n in steps]
        phrases.append(
            f"| {run['variant']}, peak {_rate(run['learning_rate'])} | "
            + " | ".join(cells)
            + " |"
        )
    (seed,) = {run["seed"] for run in e.budget}
    data = e.budget[0]["data"]
    shard, shards = re.search(r"shard (\d+) of (\d+)", data).groups()
    every, batches = re.search(
        r"every (\d+) steps x (\d+) batches", data
    ).groups()
    intervals = {
        b - a
        for run in e.budget
        for a, b in zip(run["curve"]["steps"], run["curve"]["steps"][1:])
    }
    assert intervals == {int(every)}
    phrases.append(
        f"`tiny`, seed {seed}, the default data (shard {shard} of {shards} held "
        f"out), validation every {every} steps over {batches} batches"
    )
    bert = {
        run["learning_rate"]: run
        for run in e.budget
        if run["variant"] == "bert"
    }
    higher, lower = max(bert), min(bert)
    curves = {
        lr: dict(zip(run["curve"]["steps"], run["curve"]["val_loss"]))
        for lr, run in bert.items()
    }
    last = max(curves[higher])
    assert curves[higher][last] >= curves[lower][last]
    phrases.append(
        f"At the last step the {_rate(higher)} run reached, BERT's loss is no "
        f"lower than at {_rate(lower)}, so the study uses "
        f"{_rate(e.study['learning_rate'])}"
    )
    return phrases


def _recipe_phrases(e):
    names = {"cola": "CoLA MCC", "sst2": "SST-2 accuracy"}
    phrases, final = [], {}
    for record in e.recipe:
        model = record["model"].split(" (")[0].split(" pre-trained")[0]
        for run in record["runs"]:
            scores = run["dev_per_epoch"]
            phrases.append(
                f"| {model} | {names[record['task']]} | {_rate(run['learning_rate'])} | "
                + " ".join(_score(x) for x in scores)
                + " |"
            )
            key = (model, record["task"], record["recipe"]["num_epochs"])
            final.setdefault(key, []).append((run["learning_rate"], scores[-1]))
    (recipe,) = {
        (r["recipe"]["batch_size"], r["recipe"]["warmup_ratio"])
        for r in e.recipe
    }
    phrases.append(
        f"(batch {recipe[0]}, warm-up {recipe[1]:.0%}, linear decay)"
    )
    (steps,) = {r["num_train_steps"] for r in e.budget if r["finished"]}
    assert all(
        f"pre-trained {steps} steps" in r["model"]
        for r in e.recipe
        if "pre-trained" in r["model"]
    )
    phrases.append(f"the budget runs of section 1 at {steps:,} steps")
    chosen = e.config.finetune
    (epochs,) = {r["recipe"]["epochs"] for r in e.records.finetune}
    assert all(r["num_train_examples"] for r in e.records.finetune)
    assert e.study["glue_recipe"]["max_train_examples"] is None
    phrases.append(
        f"learning rate {_rate(chosen.learning_rates[0])}, {epochs} epochs, full "
        "training sets"
    )
    # "3e-3 collapsed SST-2 to the majority class": at chance or below.
    assert all(s <= 0.5 for lr, s in final[("bert", "sst2", 3)] if lr == 3e-3)
    phrases.append("(3e-3 collapsed SST-2 to the majority class")
    # "more CoLA epochs did not help" the control.
    longer = max(s for _, s in final[("no pre-training", "cola", 10)])
    assert longer <= max(s for _, s in final[("no pre-training", "cola", 3)])
    phrases.append("more CoLA epochs did not help")
    # "the model without pre-training fine-tunes as well as the pre-trained one".
    for task in ("cola", "sst2"):
        best = {
            model: max(
                s
                for (m, t, _), runs in final.items()
                if m == model and t == task
                for _, s in runs
            )
            for model in ("bert", "no pre-training")
        }
        assert best["no pre-training"] >= best["bert"], task
    phrases.append(
        "the model without pre-training fine-tunes as well as the pre-trained one"
    )
    return phrases


def _findings_phrases(e):
    s = e.study
    phrases = []
    # Above bert at every point of every seed.
    sinusoidal, bert = e.runs("sinusoidal"), e.runs("bert")
    for seed, run in sinusoidal.items():
        pairs = zip(run["curve"]["val_loss"], bert[seed]["curve"]["val_loss"])
        assert all(a > b for a, b in pairs), seed
    phrases.append(
        "**Sinusoidal** is above `bert` at every evaluated step of every seed"
    )
    # RoPE needs a scaling and NTK works: at every longer length NTK is below
    # the plain model and linear and YaRN above it (medians over seeds).
    rope = list(e.runs("rope").values())
    scaled = rope[0]["rope_scaled_loss_by_length"]
    for n in scaled["ntk"]:
        plain = study_stats.spread(
            [r["heldout_loss_by_length"][n] for r in rope]
        )["median"]
        median = {
            k: study_stats.spread(
                [r["rope_scaled_loss_by_length"][k][n] for r in rope]
            )["median"]
            for k in scaled
        }
        assert median["ntk"] < plain < min(median["linear"], median["yarn"]), n
    phrases.append(
        "**RoPE past its training length needs a scaling**: NTK (bloc97, 2023) works"
    )
    phrases.append(
        "evaluated after fine-tuning in their papers, are worse than none here"
    )
    # Section 5.
    reach = e.summary["tupe-r"]["reach_bert"]["text"].split(" ")[0]
    assert 0.30 < int(reach) / s["num_train_steps"] < 1
    tupe = e.versus("tupe-r", "bert")
    assert tupe.high < 0 and not tupe.different
    phrases.append(
        "`tupe-r` ends below `bert` at every seed, not different by the rule, "
        "and reaches `bert`'s final loss in more than the"
    )
    for variant, reference in (
        ("diet-abs", "bert"),
        ("diet-rel", "bert"),
        ("tupe-a-tie-cls", "tupe-a"),
    ):
        assert not e.versus(variant, reference).different
    phrases.append(
        "by the rule, the pre-training loss of neither DIET variant differs "
        "from `bert`'s, nor `tupe-a-tie-cls`'s from `tupe-a`'s"
    )
    finals = {v: e.summary[v]["final"]["median"] for v in e.summary}
    assert min(finals, key=finals.get) == "rope"
    phrases.append("ends lowest at this scale")
    nope, sine = e.versus("nope", "bert"), e.versus("sinusoidal", "bert")
    assert nope.high < 0 < sine.low
    assert not nope.different and sine.different
    phrases.append(
        "ends below `bert` at every seed, not different by the rule, and"
    )
    phrases.append("above it, different by the rule")
    return phrases


def _prose(text):
    """`text` (flattened) without code, link targets and comments: the
    words a reader takes as claims."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "`x`", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def _flat(text):
    return re.sub(r"\s+", " ", text)


def problems(root):
    """What in the docs under `root` does not follow from its records."""
    e = Evidence(root)
    blocks = study_report.findings(e.config, e.records)
    found = []
    texts = {}
    for doc, names in BLOCKS.items():
        text = (Path(root) / doc).read_text()
        if doc == "README.md":
            text = text[
                text.index("## Results") : text.index(
                    "\n## ", text.index("## Results") + 1
                )
            ]
        texts[doc] = text
        present = study_findings_markdown.doc_blocks(text, e.config.name)
        for name in names:
            expected = study_findings_markdown.rebase_links(
                blocks[name], e.study_dir, Path(root) / doc
            )
            if present.get(name) != expected:
                found.append(f"{doc}: block {name!r} differs from the records")
        findings_md = e.study_dir / "findings.md"
        if findings_md.read_text() != study_findings_markdown.render(
            e.config.name, blocks
        ):
            found.append(f"{findings_md} differs from the records")
    results = texts["docs/results.md"]
    phrases = (
        _setup_phrases(e)
        + _budget_phrases(e, results)
        + _recipe_phrases(e)
        + _findings_phrases(e)
    )
    flat = _flat(results)
    for phrase in phrases:
        if _flat(phrase) not in flat:
            found.append(f"docs/results.md does not say {phrase!r}")
    for doc, text in texts.items():
        for block in study_findings_markdown.doc_blocks(
            text, e.config.name
        ).values():
            text = text.replace(block, " ")
        # Headings (section numbers) are not claims.
        prose = _flat(re.sub(r"^#.*$", " ", text, flags=re.M))
        for phrase in phrases + list(NOT_RESULTS):
            prose = prose.replace(_flat(phrase), " ")
        prose = _prose(prose)
        # Section references and a task's name are not numbers.
        prose = re.sub(r"section \d|SST-2", " ", prose)
        for number in re.findall(r"[^ ]*\d[^ ]*", prose):
            found.append(
                f"{doc}: {number!r} is typed by hand (not from a record)"
            )
    return found


def test_docs_match_records():
    assert problems(ROOT) == []


@pytest.mark.parametrize(
    "moved",
    [
        "tiny_len64_steps2000/pretrain/rope__seed1.json",
        "tiny_len64_steps2000/extend/bert-ad__seed0__steps500.json",
        "probes_len32/probes/copy/rope_seed0.json",
    ],
)
def test_moving_a_record_makes_the_docs_check_fail(tmp_path, moved):
    for doc in BLOCKS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    (tmp_path / "docs/results" / moved).unlink()
    assert any("differs from the records" in p for p in problems(tmp_path))


def test_a_number_typed_by_hand_fails_the_docs_check(tmp_path):
    for doc in BLOCKS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    results = tmp_path / "docs" / "results.md"
    results.write_text(results.read_text() + "\nRoPE is 12% better.\n")
    assert problems(tmp_path) == [
        "docs/results.md: '12%' is typed by hand (not from a record)"
    ]
