"""The runs of the comparison study, in the order they run, and their paths.

Example:

>>> from tupe_tf.analysis.study_config import CompareConfig
>>> config = CompareConfig(seeds=(0,), other_seeds=(0,))
>>> [run.key for run in plan_runs(config)][:2]
['pretrain/bert__seed0', 'pretrain/tupe-r__seed0']
"""

import dataclasses
import os
from typing import Optional

from tupe_tf.analysis.study_config import CONTROL
from tupe_tf.analysis.study_config import CORE_VARIANTS

# Under the results directory: pre-trainings run again with their record
# kept (`rerun_path`).
RERUN_DIR = "rerun"


@dataclasses.dataclass(frozen=True)
class Run:
    """One unit of the study: a pre-training, fine-tuning or extension run."""

    kind: str  # "pretrain", "finetune" or "extend"
    variant: str
    seed: int
    task: Optional[str] = None
    learning_rate: Optional[float] = None
    pretrain_seed: Optional[int] = None
    epochs: Optional[int] = None
    steps: Optional[int] = None  # an extension's second-phase steps

    @property
    def key(self):
        if self.kind == "pretrain":
            return f"pretrain/{self.variant}__seed{self.seed}"
        if self.kind == "extend":
            return f"extend/{self.variant}__seed{self.seed}__steps{self.steps}"
        return (
            f"finetune/{self.variant}__pseed{self.pretrain_seed}__"
            f"{self.task}__lr{self.learning_rate:g}__ep{self.epochs}__"
            f"seed{self.seed}"
        )


def _seeds_of(config, variant):
    return list(
        config.seeds if variant in CORE_VARIANTS else config.other_seeds
    )


def plan_runs(config):
    """Every run of the study, in the order it runs.

    A study stopped part-way should already answer the main question, and
    only the results are kept with it (the study may continue on another
    machine, without the models), so: first the control's fine-tuning; then per core variant its
    seed-`seeds[0]` pre-training followed at once by its fine-tuning; then
    the core variants' other seeds (each followed by its fine-tuning when
    it is one of `glue_pretrain_seeds`); then the remaining variants the
    same way; last, with `extension_steps`, every variant's model of each
    `extension_seeds` seed (default `seeds[0]`) extended to the tables'
    length (`study_extension`), seed by seed.
    """
    variants = list(config.variants)
    first = config.seeds[0]

    def finetunings(variant, pretrain_seed):
        if config.finetune.glue_dir is None or (
            variant != CONTROL
            and (
                variant not in config.glue_variants
                or pretrain_seed not in config.fine_tuned_pretrain_seeds
            )
        ):
            return []
        return [
            Run(
                "finetune",
                variant,
                seed,
                task,
                float(lr),
                pretrain_seed,
                epochs,
            )
            for epochs in [config.finetune.num_epochs]
            for seed in config.finetune.seeds
            for task in config.glue_tasks
            for lr in config.finetune.learning_rates
        ]

    # The control has no pre-training: one set of runs, named as seed `first`.
    runs = finetunings(CONTROL, first)
    for core in (True, False):
        group = [v for v in variants if (v in CORE_VARIANTS) == core]
        for variant in group:
            runs.append(Run("pretrain", variant, first))
            runs.extend(finetunings(variant, first))
        for variant in group:
            for seed in _seeds_of(config, variant):
                if seed != first:
                    runs.append(Run("pretrain", variant, seed))
                    runs.extend(finetunings(variant, seed))
    if config.extension_steps:
        runs.extend(
            Run(
                "extend",
                v,
                seed,
                pretrain_seed=seed,
                steps=config.extension_steps,
            )
            for seed in config.extended_pretrain_seeds
            for v in variants
        )
    seen, ordered = set(), []
    for run in runs:
        if run.key not in seen:
            seen.add(run.key)
            ordered.append(run)
    return ordered


def result_path(config, run):
    """The JSON file of a finished run."""
    return os.path.join(config.study_results_dir, run.key + ".json")


def rerun_path(config, run):
    """Where a pre-training run again (its model gone) writes its record
    when the run's own record exists: `rerun/<key>.json`, so the recorded
    run stays the evidence and the pair shows how well it reproduces."""
    return os.path.join(config.study_results_dir, RERUN_DIR, run.key + ".json")


def finetune_output_dir(config, run):
    """The fine-tuning log directory of a fine-tuning run."""
    return os.path.join(
        config.study_output_dir, "glue", os.path.basename(run.key)
    )


def model_dir(config, variant, seed):
    """The model directory of one (variant, pre-training seed)."""
    return os.path.join(
        config.study_output_dir, "models", f"{variant}__seed{seed}"
    )


def preset_dir(config, variant, seed):
    """The preset a (variant, pre-training seed) run saves."""
    return os.path.join(model_dir(config, variant, seed), "preset")


def has_preset(config, variant, seed):
    """Whether the preset of a (variant, seed) is on this machine."""
    return os.path.isfile(
        os.path.join(preset_dir(config, variant, seed), "config.json")
    )
