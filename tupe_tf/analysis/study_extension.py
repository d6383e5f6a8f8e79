"""Context extension in the study: each model trained on, at a longer length.

With `extension_steps`, every variant's model of each `extension_seeds`
seed (default: the first of `seeds`; trained at
`seq_length`, its position tables `extension_length` long) is extended to
the tables' length by a second pre-training phase, as a user would run it
(`--init_from` its preset, `docs/training.md`): the rows of the tables that
never had a gradient are refilled by the rule of `docs/spec.md`
(`copy_weights`), then the model trains `extension_steps` more steps at
the new length, with the first phase's learning rate schedule and tokens per
step. The record holds the held-out loss at the new length as trained (the
extrapolation table's entry), with the tables refilled (before the second
phase) and after it, and at the training length before and after, so the
report shows which encodings extend cheaply.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> config = CompareConfig(extension_steps=500)
>>> config.extension_length, config.extension_batch_size
(256, 8)
"""

import os
import shutil
import time

from tupe_tf import training
from tupe_tf.analysis import paired_stats
from tupe_tf.analysis import study_data
from tupe_tf.analysis import study_plan
from tupe_tf.analysis import study_records
from tupe_tf.analysis import study_stats
from tupe_tf.analysis.study_config import NO_POSITIONS
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.models.context_extension import copy_weights
from tupe_tf.utils.markdown import markdown_table

KIND = "extend"


def extension_files(config, data):
    """The training shards at `config.extension_length`."""
    if config.extension_train_files:
        return list(config.extension_train_files)
    return study_data.prepare_extension_data(
        config.pretrain.work_dir, data.vocab_file, config.extension_length
    )


def model_dir(config, run):
    """Where the second phase of `run` trains."""
    return os.path.join(
        config.study_output_dir, "extended", os.path.basename(run.key)
    )


def _refilled(config, trained):
    """`trained` with its never-trained table rows refilled by the rule."""
    target = type(trained).from_config(trained.get_config())
    copy_weights(trained, target, config.pretrain.seq_length)
    return target


def _second_phase(config, run, preset, data, train_files):
    """Trains the extension; returns `run_pretraining`'s results dict and
    the validation curve."""
    # An interrupted run starts over: its curve must be one run's history.
    shutil.rmtree(model_dir(config, run), ignore_errors=True)
    steps = config.extension_steps
    interval = min(config.eval_interval, steps)
    results = training.run_pretraining(
        config.pretrain.replace(
            model_dir=model_dir(config, run),
            init_from=preset,
            train_files=train_files,
            eval_files=data.eval_files[config.extension_length],
            vocab_file=data.vocab_file,
            seq_length=config.extension_length,
            global_batch_size=config.extension_batch_size,
            num_train_steps=steps,
            save_every=interval,
            eval_every=interval,
            seed=run.seed,
            model=dict(
                max_sequence_length=config.extension_length,
                **VARIANTS[run.variant],
            ),
        )
    ).results
    return results, study_records.validation_curve(results, interval)


def run_extension(config, run, data, files):
    """Extends one variant's model; returns its record.

    Args:
        config: the `CompareConfig`.
        run: the `extend` `Run`.
        data: the study's `StudyData` (vocabulary, held-out shards).
        files: `extension_files(config, data)`.
    """
    start = time.time()
    short, long = config.pretrain.seq_length, config.extension_length

    def losses(model, *lengths):
        """`{length: held-out loss}` of `model`, traced once."""
        by_length = study_data.heldout_losses(
            model, data.eval_files, data.vocab_file, lengths
        )
        return {str(n): by_length[n]["loss"] for n in lengths}

    preset = study_plan.preset_dir(config, run.variant, run.pretrain_seed)
    trained = study_data.load_masked_lm(preset)
    before = losses(trained, short, long)
    refilled = losses(_refilled(config, trained), long)
    results, curve = _second_phase(config, run, preset, data, files)
    extended = study_data.load_masked_lm(
        os.path.join(model_dir(config, run), "preset")
    )
    return {
        "kind": KIND,
        "variant": run.variant,
        "options": VARIANTS[run.variant],
        "seed": run.seed,
        "trained_length": short,
        "length": long,
        "num_train_steps": config.extension_steps,
        "global_batch_size": config.extension_batch_size,
        "grown_tables": results["init_from"]["grown_tables"],
        "heldout_loss": {
            "trained": before,
            "refilled": refilled,
            "extended": losses(extended, short, long),
        },
        "curve": curve,
        "data_fingerprint": data.fingerprint,
        "extension_data_fingerprint": study_data.data_fingerprint(
            data.vocab_file, files, {}
        ),
        "wall_seconds": time.time() - start,
    }


def load(config):
    """The study's extension records, by file name."""
    return study_records.load_kind(config, KIND)


def gaps(record, short, long):
    """`(before, after)`: how much worse a record's model does at `long`
    than at `short`, with its tables refilled and after the second phase."""
    losses = record["heldout_loss"]
    return (
        losses["refilled"][long] - losses["trained"][short],
        losses["extended"][long] - losses["extended"][short],
    )


def _final_versus_nope(variant, seeds, pretrained):
    """`Paired` of the extended seeds' pre-training final loss minus
    `nope`'s at the same seed (None for `nope` itself)."""
    if variant == NO_POSITIONS:
        return None
    finals = {
        (v, seed): r["final_val_loss"] for (v, seed), r in pretrained.items()
    }
    return paired_stats.paired(
        {s: finals[(variant, s)] for s in seeds if (variant, s) in finals},
        {
            s: finals[(NO_POSITIONS, s)]
            for s in seeds
            if (NO_POSITIONS, s) in finals
        },
    )


def summarize(config, records, pretrain, order):
    """Per (variant, steps), in `order`: spreads over the extended seeds.

    Returns a list of dicts with `variant`, `steps`, `seeds`,
    `versus_nope` (the extended seeds' pre-training final loss minus
    `nope`'s, the bag-of-words level, `paired_stats.Paired`), `losses`
    (`{column: spread}` of the held-out losses), the `before` and `after`
    spreads of `gaps` and `change`, after minus before at the same seed
    (`paired_stats`, Holm over the rows of the same `steps`).
    """
    short = str(config.pretrain.seq_length)
    long = str(config.extension_length)
    pretrained = {(r["variant"], r["seed"]): r for r in pretrain}
    rank = {variant: i for i, variant in enumerate(order)}
    groups = {}
    for record in records:
        key = (record["variant"], record["num_train_steps"])
        groups.setdefault(key, []).append(record)
    rows = []
    for (variant, steps), group in sorted(
        groups.items(), key=lambda kv: (rank.get(kv[0][0], len(rank)), kv[0])
    ):
        group = sorted(group, key=lambda r: r["seed"])
        columns = {
            f"{short} as trained": ("trained", short),
            f"{long} as trained": ("trained", long),
            f"{long} tables refilled": ("refilled", long),
            f"{long} extended": ("extended", long),
            f"{short} extended": ("extended", short),
        }
        pairs = [gaps(r, short, long) for r in group]
        rows.append(
            {
                "variant": variant,
                "steps": steps,
                "seeds": [r["seed"] for r in group],
                "versus_nope": _final_versus_nope(
                    variant, [r["seed"] for r in group], pretrained
                ),
                "losses": {
                    name: study_stats.spread(
                        [r["heldout_loss"][phase][n] for r in group]
                    )
                    for name, (phase, n) in columns.items()
                },
                "before": study_stats.spread([b for b, _ in pairs]),
                "after": study_stats.spread([a for _, a in pairs]),
                "change": paired_stats.paired(
                    {r["seed"]: a for r, (_, a) in zip(group, pairs)},
                    {r["seed"]: b for r, (b, _) in zip(group, pairs)},
                ),
            }
        )
    for steps in {row["steps"] for row in rows}:
        family = [row for row in rows if row["steps"] == steps]
        decided = paired_stats.decide(
            {i: r["change"] for i, r in enumerate(family)}
        )
        for i, row in enumerate(family):
            row["change"] = decided[i]
    return rows


def _seed_list(seeds):
    return ",".join(str(s) for s in seeds) or "-"


def render_table(config, records, pretrain, order):
    """The extension section of `tables.md` ('' without records)."""
    if not records:
        return ""
    short = config.pretrain.seq_length
    long = config.extension_length
    rows = summarize(config, records, pretrain, order)
    header = (
        ["variant", "steps", "seeds", f"final loss - {NO_POSITIONS}'s"]
        + list(rows[0]["losses"])
        + [
            f"{long} - {short}, refilled",
            f"{long} - {short}, extended",
            "extended - refilled",
        ]
    )
    cells = [
        [
            row["variant"],
            str(row["steps"]),
            _seed_list(row["seeds"]),
            paired_stats.format_difference(row["versus_nope"]),
        ]
        + [study_stats.format_spread(s) for s in row["losses"].values()]
        + [
            study_stats.format_spread(row["before"], signed=True),
            study_stats.format_spread(row["after"], signed=True),
            paired_stats.describe(row["change"]),
        ]
        for row in rows
    ]
    return (
        f"Context extension {short} -> {long}: held-out MLM loss, median "
        "[min, max] over the extended pre-training seeds (`seeds`), of "
        f"each model as trained at {short}, with its tables' never-trained "
        f"rows refilled (docs/spec.md), and after `steps` more steps at "
        f"{long} (batch {config.extension_batch_size}, the same tokens per "
        f"step); `{long} - {short}`: per seed, how much worse the model "
        "does on the longer inputs than on the trained ones, before and "
        "after the second phase (which also trains the model further: the "
        f"`{short} extended` column); `extended - refilled`: that gap after "
        "minus before at the same seed (mean [min, max], the rule of "
        f"`paired_stats`); `final loss - {NO_POSITIONS}'s`: the extended "
        "seeds' pre-training final validation loss minus "
        f"`{NO_POSITIONS}`'s at the same seed, the bag-of-words level:\n\n"
        + markdown_table(header, cells)
    )
