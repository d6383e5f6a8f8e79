"""Small-scale reproduction of the papers' comparison (TUPE fig. 5a, Table 1).

Every variant is pre-trained at the same size and step budget on the same
shards with the same seed and data order, its validation MLM loss recorded
every `eval_interval` steps; then each preset is fine-tuned on GLUE tasks
from a local directory over a few seeds and the medians are tabulated.
"""

import dataclasses
import json
import os
import time
from typing import Optional
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from data_pipeline import fileio  # noqa: E402

# name -> TupeBackbone options (the rows of the TUPE paper's Table 1 that
# this package implements, plus DIET).
VARIANTS = {
    "bert": dict(position_encoding="bert"),
    "bert-r": dict(position_encoding="bert-r"),
    "tupe-a": dict(position_encoding="tupe-a"),
    "tupe-r": dict(position_encoding="tupe-r"),
    "tupe-a-tie-cls": dict(position_encoding="tupe-a", untie_cls=False),
    "bert-ad": dict(position_encoding="bert-ad"),
    "diet-abs": dict(position_encoding="diet-abs"),
    "diet-rel": dict(position_encoding="diet-rel"),
}


@dataclasses.dataclass
class CompareConfig:
    """What `run_comparison` does; every field is a flag of compare.py.

    Attributes:
        output_dir: where models, curves, tables go.
        variants: names from `VARIANTS`.
        model_size: `tiny`, `small`, ... (see `tupe_tf.training.MODEL_SIZES`).
        seq_length: pre-training sequence length.
        global_batch_size: pre-training batch.
        num_train_steps: pre-training steps per variant.
        eval_interval: steps between validation-loss points.
        eval_steps: validation batches per point.
        learning_rate: pre-training peak learning rate.
        seed: seed of weights and data order (the same for every variant).
        glue_dir: directory in the GLUE TSV layout; None skips fine-tuning.
        glue_tasks: task names.
        glue_seeds: fine-tuning seeds (median reported).
        glue_learning_rate: fine-tuning learning rate.
        glue_epochs: fine-tuning epochs.
        glue_seq_length: fine-tuning sequence length.
        glue_max_train_examples: cap on training examples per task.
        work_dir: where the default vocabulary and shards are built.
        train_files, eval_files, vocab_file: use these shards instead of
            the default ones built from the embedded corpus.
        model_dims: explicit dims overriding `model_size` (e.g. tests).
    """

    output_dir: str = "./runs/compare"
    variants: Sequence[str] = tuple(VARIANTS)
    model_size: str = "tiny"
    seq_length: int = 128
    global_batch_size: int = 32
    num_train_steps: int = 1000
    eval_interval: int = 100
    eval_steps: int = 10
    learning_rate: float = 1e-3
    seed: int = 0
    glue_dir: Optional[str] = None
    glue_tasks: Sequence[str] = ("cola", "sst2")
    glue_seeds: Sequence[int] = (0, 1, 2)
    glue_learning_rate: float = 1e-4
    glue_epochs: int = 3
    glue_seq_length: int = 64
    glue_max_train_examples: Optional[int] = 2000
    work_dir: str = "./runs/default"
    train_files: Sequence[str] = ()
    eval_files: Sequence[str] = ()
    vocab_file: Optional[str] = None
    model_dims: Optional[dict] = None


def validate_compare_config(config):
    unknown = [name for name in config.variants if name not in VARIANTS]
    if unknown:
        raise ValueError(
            f"--variants has unknown names {unknown}; valid: {list(VARIANTS)}"
        )
    if (
        config.num_train_steps < config.eval_interval
        or config.eval_interval < 1
    ):
        raise ValueError(
            "--eval_interval must be between 1 and --num_train_steps "
            f"(got {config.eval_interval} and {config.num_train_steps})."
        )
    if config.glue_dir is not None and not os.path.isdir(config.glue_dir):
        raise ValueError(f"--glue_dir {config.glue_dir!r} is not a directory.")


def pretrain_variant(config, name, data):
    """Pre-trains one variant; returns its validation-loss curve."""
    from tupe_tf import training

    model_dir = os.path.join(config.output_dir, "models", name)
    pretrain_config = training.PretrainConfig(
        model_dir=model_dir,
        train_files=data.train_files,
        eval_files=data.eval_files,
        vocab_file=data.vocab_file,
        seq_length=config.seq_length,
        global_batch_size=config.global_batch_size,
        num_train_steps=config.num_train_steps,
        save_every=config.eval_interval,
        eval_every=config.eval_interval,
        eval_steps=config.eval_steps,
        seed=config.seed,
        verbose=2,
        model=training.ModelConfig(
            model_size=config.model_size,
            max_sequence_length=max(128, config.seq_length),
            **(config.model_dims or {}),
            **VARIANTS[name],
        ),
        # Tiny CPU models: a larger peak rate than BERT-base's, 5% warm-up.
        optimizer=training.OptimizerConfig(
            learning_rate=config.learning_rate, warmup_ratio=0.05
        ),
    )
    start = time.time()
    result = training.run_pretraining(pretrain_config)
    history = result.results["history_this_run"]
    curve = history.get("val_loss", [])
    return {
        "steps": [config.eval_interval * (i + 1) for i in range(len(curve))],
        "val_loss": [float(v) for v in curve],
        "final_eval": result.results["eval"],
        "preset_dir": result.results["preset_dir"],
        "seconds": time.time() - start,
    }


def finetune_variant(config, name, preset_dir):
    """Fine-tunes one preset on every GLUE task; returns medians."""
    from tupe_tf import training
    from tupe_tf.training import finetune

    scores = {}
    for task in config.glue_tasks:
        results = finetune.run_glue(
            training.GlueConfig(
                task=task,
                preset=preset_dir,
                output_dir=os.path.join(config.output_dir, "glue", name),
                glue_dir=config.glue_dir,
                seq_length=config.glue_seq_length,
                learning_rates=[config.glue_learning_rate],
                seeds=list(config.glue_seeds),
                num_epochs=config.glue_epochs,
                max_train_examples=config.glue_max_train_examples,
                verbose=0,
            )
        )
        primary = results["primary_metric"]
        validation = next(iter(results["best"].values()))
        scores[task] = {
            "metric": primary,
            "median": validation[primary],
            "all": validation,
        }
    return scores


def plot_curves(curves, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        if curve["val_loss"]:
            ax.plot(
                curve["steps"],
                curve["val_loss"],
                marker="o",
                markersize=3,
                label=name,
            )
    ax.set_xlabel("pre-training step")
    ax.set_ylabel("validation MLM loss")
    ax.set_title("Validation MLM loss (same data, seed and budget)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with fileio.atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def results_table(config, curves, glue):
    tasks = list(config.glue_tasks) if glue else []
    header = ["variant", "final val MLM loss", "steps to bert's final loss"]
    header += [f"{t} ({next(iter(glue.values()))[t]['metric']})" for t in tasks]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    bert_final = curves.get("bert", {}).get("val_loss", [None])[-1]
    for name, curve in curves.items():
        final = curve["val_loss"][-1] if curve["val_loss"] else float("nan")
        reach = "n/a"
        if bert_final is not None:
            hits = [
                s
                for s, v in zip(curve["steps"], curve["val_loss"])
                if v <= bert_final
            ]
            reach = str(hits[0]) if hits else "not reached"
        row = [name, f"{final:.3f}", reach]
        row += [f"{glue[name][t]['median']:.3f}" for t in tasks]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def run_comparison(config: CompareConfig):
    """Runs the whole comparison and writes curves, tables and JSON.

    Returns:
        The results dict (also `<output_dir>/comparison.json`).

    Example:
    >>> results = run_comparison(CompareConfig(glue_dir="glue"))
    """
    from data_pipeline import default_data

    validate_compare_config(config)
    os.makedirs(config.output_dir, exist_ok=True)
    if config.train_files:
        data = default_data.DefaultData(
            vocab_file=config.vocab_file,
            shard_dir=None,
            train_files=list(config.train_files),
            eval_files=list(config.eval_files),
        )
    else:
        data = default_data.prepare_default_data(
            config.work_dir, seq_length=config.seq_length
        )
    curves, glue = {}, {}
    for index, name in enumerate(config.variants):
        print(
            f"[compare] pre-training {name} ({index + 1}/"
            f"{len(config.variants)})",
            flush=True,
        )
        curves[name] = pretrain_variant(config, name, data)
        print(
            f"[compare] {name}: val loss {curves[name]['val_loss']} "
            f"({curves[name]['seconds']:.0f}s)",
            flush=True,
        )
    curve_path = plot_curves(
        curves, os.path.join(config.output_dir, "val_mlm_loss.png")
    )
    if config.glue_dir:
        for index, name in enumerate(config.variants):
            print(
                f"[compare] fine-tuning {name} on {list(config.glue_tasks)} "
                f"({index + 1}/{len(config.variants)})",
                flush=True,
            )
            glue[name] = finetune_variant(
                config, name, curves[name]["preset_dir"]
            )
            print(
                f"[compare] {name}: "
                + ", ".join(
                    f"{t} {s['metric']} {s['median']:.3f}"
                    for t, s in glue[name].items()
                ),
                flush=True,
            )
    table = results_table(config, curves, glue)
    results = {
        "config": dataclasses.asdict(config),
        "curves": curves,
        "glue": glue,
        "table_markdown": table,
        "curve_png": os.path.abspath(curve_path),
    }
    _write(
        os.path.join(config.output_dir, "comparison.json"),
        json.dumps(results, indent=2, default=str),
    )
    _write(os.path.join(config.output_dir, "comparison.md"), table)
    print(table, flush=True)
    return results


def _write(path, text):
    fileio.write_text_atomically(path, text)
