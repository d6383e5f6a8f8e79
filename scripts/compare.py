r"""The comparison study of every position encoding (resumable).

    nohup nice -n 10 python scripts/compare.py \
        --glue_dir=/work/shared/data/glue > runs/study.log 2>&1 &

Runs what is missing of the study (see `tupe_tf.analysis.compare`), one JSON
file per run under `<results_dir>/<name>/`, and rewrites the tables and
figures after every run. Rerun the same command to resume; add seeds with
`--seeds`/`--other_seeds`/`--glue_seeds`. `--from_results` only rebuilds
the tables and figures from the JSON files (no training, no models needed).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from tupe_tf.analysis import compare  # noqa: E402
from tupe_tf.training import cli  # noqa: E402
from tupe_tf.training.config import InvalidInputError  # noqa: E402

FLAGS = flags.FLAGS
_DEFAULTS = compare.CompareConfig()
_HELP = {
    "results_dir": "Per-run JSON files go to <results_dir>/<study name>/.",
    "figures_dir": "Figures go to <figures_dir>/<study name>/.",
    "output_dir": "Models and fine-tuning logs (not committed).",
    "work_dir": "Vocabulary and shards of the study's data split.",
    "variants": f"Variants, from {list(compare.VARIANTS)}.",
    "seeds": f"Pre-training seeds of {list(compare.CORE_VARIANTS)}.",
    "other_seeds": "Pre-training seeds of the other variants.",
    "model_size": "tiny|mini|small|...",
    "seq_length": "Pre-training sequence length.",
    "extrapolation_factors": "Held-out lengths as multiples of it.",
    "global_batch_size": "Pre-training batch.",
    "num_train_steps": "Pre-training steps per run.",
    "learning_rate": "Pre-training peak learning rate.",
    "warmup_ratio": "Pre-training warm-up fraction.",
    "eval_interval": "Steps between validation-loss points.",
    "eval_steps": "Validation batches per point.",
    "plateau_loss": "Validation loss of the plateau (report only).",
    "glue_dir": "GLUE TSV directory (CoLA/, SST-2/); unset: no fine-tuning.",
    "glue_tasks": "GLUE tasks.",
    "glue_learning_rates": "Fine-tuning learning rates (best median kept).",
    "glue_seeds": "Fine-tuning seeds.",
    "glue_epochs": "Fine-tuning epochs.",
    "glue_seq_length": "Fine-tuning sequence length.",
    "glue_batch_size": "Fine-tuning batch.",
    "glue_max_train_examples": "Cap on fine-tuning examples (0: all).",
    "heldout_fraction": "Fraction of the corpus held out, by document.",
}
_LISTS = {
    "variants": str,
    "seeds": int,
    "other_seeds": int,
    "extrapolation_factors": int,
    "glue_tasks": str,
    "glue_learning_rates": float,
    "glue_seeds": int,
}
for _name, _help in _HELP.items():
    _default = getattr(_DEFAULTS, _name)
    if _name in _LISTS:
        flags.DEFINE_list(_name, [str(v) for v in _default], _help)
    elif _name == "glue_max_train_examples":
        flags.DEFINE_integer(_name, _default or 0, _help)
    elif isinstance(_default, bool):
        flags.DEFINE_boolean(_name, _default, _help)
    elif isinstance(_default, int):
        flags.DEFINE_integer(_name, _default, _help)
    elif isinstance(_default, float):
        flags.DEFINE_float(_name, _default, _help)
    else:
        flags.DEFINE_string(_name, _default, _help)
flags.DEFINE_boolean(
    "from_results",
    False,
    "Only rebuild tables and figures from the per-run JSON files.",
)
flags.DEFINE_integer("max_runs", None, "Stop after this many new runs.")


def config_from_flags():
    values = {}
    for name in _HELP:
        value = getattr(FLAGS, name)
        if name in _LISTS:
            try:
                value = [_LISTS[name](v) for v in value]
            except ValueError as error:
                raise app.UsageError(f"--{name}: {error}") from error
        values[name] = value
    values["glue_max_train_examples"] = (
        values["glue_max_train_examples"] or None
    )
    return compare.CompareConfig(**values)


def compare_from_flags(flag_values):
    """Runs (or, with --from_results, reports) the study of the flags."""
    try:
        config = config_from_flags()
        if flag_values.from_results:
            compare.validate_compare_config(config)
            return compare.report(config)
        return compare.run_comparison(config, max_runs=flag_values.max_runs)
    except InvalidInputError:
        raise
    except ValueError as error:
        raise InvalidInputError(str(error)) from error


def print_result(result):
    print(result["tables"], flush=True)
    print(
        f"[compare] total wall time of the finished runs: "
        f"{result['total_wall_seconds'] / 60:.1f} min",
        flush=True,
    )


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    return cli.run_main(compare_from_flags, FLAGS, print_result)


if __name__ == "__main__":
    cli.run(main)
