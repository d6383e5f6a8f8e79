"""What the position probes run: tasks, variants, seeds and sizes.

Every field with a help text is a flag of `scripts/probe.py`. The variants
are the comparison study's (`study_config.VARIANTS`: every position
encoding of the table and the ablation `tupe-a-tie-cls`).

Example:

>>> config = ProbeConfig(results_dir="docs/results")
>>> config.name, config.eval_lengths
('probes_len32', [32, 64, 128, 256])
>>> config.record_path("copy", "rope", 0)
'docs/results/probes_len32/probes/copy/rope_seed0.json'
"""

import dataclasses
import os
from typing import Optional
from typing import Sequence

from tupe_tf.analysis.probe_tasks import COPY_POOL_SIZE
from tupe_tf.analysis.probe_tasks import KEY_DIGITS
from tupe_tf.analysis.probe_tasks import PASSKEY_PREFIX
from tupe_tf.analysis.probe_tasks import PASSKEY_SUFFIX
from tupe_tf.analysis.probe_tasks import TASKS
from tupe_tf.analysis.study_config import VARIANTS
from tupe_tf.training.config import OptimizerConfig
from tupe_tf.utils.errors import UserError
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields
from tupe_tf.utils.settings import Settings
from tupe_tf.utils.settings import at_least
from tupe_tf.utils.settings import between
from tupe_tf.utils.settings import nested
from tupe_tf.utils.settings import setting


@refuses_unknown_fields
@dataclasses.dataclass
class ProbeConfig(Settings):
    """The probes' settings (one flag each).

    Each (task, variant, seed) is one run: a model trained from scratch at
    `seq_length` and evaluated on held-out examples at `seq_length` and at
    each multiple of `length_factors`. Its record goes to
    `<results_dir>/<name>/probes/<task>/<variant>_seed<seed>.json`.

    Example:

    >>> ProbeConfig(seq_length=64).name
    'probes_len64'
    """

    results_dir: str = setting(
        "runs/probes",
        help="Records go to <results_dir>/<study name>/probes/<task>/ "
        "(the project's: docs/results).",
    )
    work_dir: str = setting(
        "runs/probe_data",
        help="The probes' vocabulary and token streams (built once).",
    )
    tasks: Sequence[str] = setting(
        TASKS, help=f"Tasks, from {list(TASKS)}.", element_type=str
    )
    variants: Sequence[str] = setting(
        tuple(VARIANTS),
        help=f"Variants, from {list(VARIANTS)}.",
        element_type=str,
    )
    seeds: Sequence[int] = setting(
        (0, 1, 2, 3, 4),
        help="Seeds: each sets the examples, their order and the initial "
        "weights (shared by every variant).",
        element_type=int,
        valid=at_least(0),
    )
    seq_length: int = setting(
        32,
        help="L: the training length (examples of L/2+1 .. L tokens).",
        valid=at_least(8),
    )
    length_factors: Sequence[int] = setting(
        (2, 4, 8),
        help="Evaluation lengths past L, as multiples of --seq_length "
        "(examples of nL/2+1 .. nL tokens: none seen in training).",
        element_type=int,
        valid=at_least(2),
    )
    num_layers: int = setting(2, help="Encoder layers.", valid=at_least(1))
    num_heads: int = setting(4, help="Attention heads.", valid=at_least(1))
    hidden_dim: int = setting(64, help="Hidden size.", valid=at_least(2))
    intermediate_dim: int = setting(
        128, help="Feed-forward size.", valid=at_least(1)
    )
    num_train_steps: int = setting(
        1000, help="Training steps of every run.", valid=at_least(1)
    )
    batch_size: int = setting(32, help="Training batch.", valid=at_least(1))
    optimizer: OptimizerConfig = nested(
        # Pre-training's AdamW and linear decay; a tiny model on a clean
        # task takes a larger peak rate and a longer warm-up.
        lambda: OptimizerConfig(learning_rate=1e-3, warmup_ratio=0.1),
        flags=("learning_rate", "warmup_ratio"),
    )
    eval_examples: int = setting(
        1024, help="Held-out examples per evaluated length.", valid=at_least(8)
    )
    distance_k: int = setting(
        4,
        help="distance: the markers are at most k apart (positives) or "
        "k+1 .. 3k apart (negatives).",
        valid=at_least(1),
    )
    copy_pool_size: int = setting(
        COPY_POOL_SIZE,
        help="copy: spans are drawn from this many of the most frequent "
        "tokens (the head's classes).",
        valid=at_least(2),
    )
    heldout_fraction: float = setting(
        0.08,
        help="Fraction of the corpus held out, by document (the study's).",
        valid=between(0, 1, low_open=True, high_open=True),
    )
    jit_compile: bool = setting(
        False,
        help="XLA-compile the training step (slower for runs this short).",
    )
    from_results: bool = setting(
        False, help="Only print the tables of the records (no training)."
    )
    max_runs: Optional[int] = setting(
        None,
        help="Stop after this many new runs (unset: all).",
        valid=at_least(1),
    )

    @property
    def name(self):
        """The study's directory name."""
        return f"probes_len{self.seq_length}"

    @property
    def study_results_dir(self):
        return os.path.join(self.results_dir, self.name)

    @property
    def eval_lengths(self):
        """L, then each factor times L."""
        return [self.seq_length] + [
            self.seq_length * f for f in self.length_factors
        ]

    def record_path(self, task, variant, seed):
        """Where the record of one run goes."""
        return os.path.join(
            self.study_results_dir, "probes", task, f"{variant}_seed{seed}.json"
        )

    def task_options(self, task):
        """The generator options of `task` (`probe_tasks.make_examples`)."""
        return {
            "copy": {"pool_size": self.copy_pool_size},
            "distance": {"k": self.distance_k},
        }.get(task, {})

    def dims(self):
        """The backbone arguments every variant shares (the vocabulary size
        comes from the data). Tables are built for the longest evaluated
        length; dropout is off (the probes are small, clean tasks)."""
        return {
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": 0.0,
            "max_sequence_length": max(self.eval_lengths),
        }

    def study_settings(self):
        """Settings every record of the study must share (`study.json`)."""
        return {
            "seq_length": self.seq_length,
            "eval_lengths": self.eval_lengths,
            "model": self.dims(),
            "num_train_steps": self.num_train_steps,
            "batch_size": self.batch_size,
            "optimizer": dataclasses.asdict(self.optimizer),
            "eval_examples": self.eval_examples,
            "distance_k": self.distance_k,
            "copy_pool_size": self.copy_pool_size,
            "heldout_fraction": self.heldout_fraction,
            "jit_compile": self.jit_compile,
        }

    def check_rules(self):
        for flag, names, valid in (
            ("--tasks", self.tasks, TASKS),
            ("--variants", self.variants, VARIANTS),
        ):
            unknown = [name for name in names if name not in valid]
            if unknown or not names:
                raise UserError(
                    f"{flag} has unknown names {unknown or '(empty)'}; "
                    f"valid: {list(valid)}"
                )
        if not self.seeds:
            raise UserError("--seeds must not be empty.")
        if self.hidden_dim % self.num_heads:
            raise UserError(
                f"--hidden_dim={self.hidden_dim} must be a multiple of "
                f"--num_heads={self.num_heads}."
            )
        shortest = self.seq_length // 2 + 1
        # distance: a negative pair is up to 3k apart inside [CLS] .. [SEP].
        if 3 * self.distance_k + 3 > shortest:
            raise UserError(
                f"--distance_k={self.distance_k} is too large for "
                f"--seq_length={self.seq_length}: examples may be "
                f"{shortest} tokens, and 3k + 3 must fit (k <= "
                f"{(shortest - 3) // 3})."
            )
        passkey = len(PASSKEY_PREFIX) + KEY_DIGITS + len(PASSKEY_SUFFIX)
        if shortest < passkey + KEY_DIGITS + 3:
            raise UserError(
                f"--seq_length={self.seq_length} is too short for the "
                "passkey probe."
            )
        longest_span = (max(self.eval_lengths) - 3) // 2
        if self.copy_pool_size < longest_span:
            raise UserError(
                f"--copy_pool_size={self.copy_pool_size} is smaller than "
                f"the longest copied span ({longest_span} tokens at length "
                f"{max(self.eval_lengths)})."
            )
        if sorted(set(self.length_factors)) != list(self.length_factors):
            raise UserError(
                "--length_factors must be increasing, without repeats "
                f"(got {list(self.length_factors)})."
            )
