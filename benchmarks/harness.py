"""The benchmarks' one harness: rounds, timers, per-round ratios, the table.

A benchmark declares its cases, each a name and a callable that runs one
timed unit and returns its `Timing` (seconds per step, wall and CPU).
`run_rounds` runs every case once per round, in an order shuffled anew each
round, so that load from other processes hits all cases alike; `summarize`
gives the median [min, max] over rounds of each case's time and of its
per-round ratio to a reference case (both measured in the same round);
`print_table` prints them as one markdown table.

Cases that run in this process time their steps with `time_steps`; cases
whose work runs in a worker process return the worker's own `Timing`, and
cases that run a fresh child process per unit time it with `time_process`.
TensorFlow is not imported here: the JAX benchmarks run without it.

Example:

>>> FLAGS = define_round_flags(rounds=9, steps_per_round=3)  # doctest: +SKIP
>>> samples = run_rounds(
...     {"a": lambda: time_steps(step_a, 3), "b": lambda: ...}, rounds=9
... )  # doctest: +SKIP
>>> summarize(samples["b"], reference=samples["a"]).wall_ratio.median
... # doctest: +SKIP
"""

import dataclasses
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

from absl import flags

from tupe_tf.utils.markdown import markdown_table


def define_round_flags(rounds, steps_per_round=None):
    """Defines `--rounds` (and `--steps_per_round` unless None)."""
    flags.DEFINE_integer(
        "rounds",
        rounds,
        "Interleaved rounds: every case once per round, in a shuffled "
        "order; medians and [min, max] over the rounds.",
        lower_bound=1,
    )
    if steps_per_round is not None:
        flags.DEFINE_integer(
            "steps_per_round",
            steps_per_round,
            "Timed steps per case and round.",
            lower_bound=1,
        )
    return flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per step of one timed unit.

    Args:
        wall: wall-clock seconds per step.
        cpu: CPU seconds per step of the process that ran it (all its
            threads): far less sensitive than wall time to other processes
            competing for the cores.
    """

    wall: float
    cpu: float

    def per(self, steps):
        """This unit's time per step, for a unit that ran `steps` steps."""
        return Timing(self.wall / steps, self.cpu / steps)


def define_latency_flags(repeats):
    """`--batch_sizes` and `--repeats` of the inference-latency benchmarks.

    Returns:
        The two flag holders, `(batch_sizes, repeats)`.
    """
    batch_sizes = flags.DEFINE_list(
        "batch_sizes", ["1", "32"], "Batch sizes to time."
    )
    flags.register_validator(
        "batch_sizes",
        lambda v: all(s.isdigit() and int(s) > 0 for s in v),
        message="--batch_sizes takes positive integers.",
    )
    repeats = flags.DEFINE_integer(
        "repeats",
        repeats,
        "Timed calls per model, batch size and round (batch 1 uses 4x).",
        lower_bound=1,
    )
    return batch_sizes, repeats


def median_of_calls(call, repeats):
    """A timed unit: the median wall and CPU time of `repeats` calls."""

    def unit():
        timings = [time_steps(call, 1) for _ in range(repeats)]
        return Timing(
            statistics.median(t.wall for t in timings),
            statistics.median(t.cpu for t in timings),
        )

    return unit


def time_steps(step, steps, finish=None):
    """Runs `step()` `steps` times in this process; its per-step `Timing`.

    `finish`, if given, is called on the last step's result inside the
    timing (e.g. `jax.block_until_ready`: JAX dispatches asynchronously).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        result = step()
    if finish is not None:
        finish(result)
    return Timing(
        (time.perf_counter() - wall) / steps,
        (time.process_time() - cpu) / steps,
    )


@dataclasses.dataclass(frozen=True)
class ChildRun:
    """One child process: its `Timing`, peak RSS in MB and its stdout."""

    timing: Timing
    peak_rss_mb: float
    stdout: str

    def last_json(self):
        """The JSON object printed last (tupe-tf's scripts end with one)."""
        start = self.stdout.rfind("\n{") + 1
        return json.loads(self.stdout[start:])


def time_process(command, log_path, env=None):
    """Runs `command` in a fresh child process, its stderr to `log_path`.

    Returns a `ChildRun`: wall time from start to exit; CPU time and peak
    RSS from `os.wait4`, so they include the descendants the child waited
    for (CPU summed, RSS the largest single process).
    """
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, env=env, text=True
        )
        stdout = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        with open(log_path, errors="replace") as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed:\n{tail}")
    return ChildRun(
        Timing(wall, usage.ru_utime + usage.ru_stime),
        usage.ru_maxrss / 1024,
        stdout,
    )


def run_rounds(cases, rounds):
    """`{name: [Timing of each round]}`; `cases` maps names to timed units.

    Each round runs every case once, in an order shuffled with the round's
    index as seed (reproducible, and no case always first after a pause).
    `rounds` is a count, or `{name: count}` for cases that run in the first
    `count` rounds only (a slow case in fewer rounds than the others).
    """
    if not isinstance(rounds, dict):
        rounds = dict.fromkeys(cases, rounds)
    samples = {name: [] for name in cases}
    total = max(rounds.values(), default=0)
    for round_index in range(total):
        order = [name for name in cases if rounds[name] > round_index]
        random.Random(round_index).shuffle(order)
        for name in order:
            samples[name].append(cases[name]())
        print(f"round {round_index + 1}/{total} done", flush=True)
    return samples


@dataclasses.dataclass(frozen=True)
class Spread:
    """Values over rounds: their median, min and max."""

    values: tuple

    @property
    def median(self):
        return statistics.median(self.values)

    @property
    def low(self):
        return min(self.values)

    @property
    def high(self):
        return max(self.values)

    def map(self, fn):
        """The spread of `fn` of each value (e.g. steps/s from s/step)."""
        return Spread(tuple(fn(v) for v in self.values))

    def format(self, spec=".2f", median_only=False):
        """'median [min, max]', each with the format `spec`."""
        text = format(self.median, spec)
        if median_only:
            return text
        return f"{text} [{self.low:{spec}}, {self.high:{spec}}]"


@dataclasses.dataclass(frozen=True)
class Summary:
    """One case over the rounds.

    Args:
        wall, cpu: `Spread`s of seconds per step.
        wall_ratio, cpu_ratio: `Spread`s of the per-round time ratio
            case / reference (None without a reference): below 1 the case
            is faster.
    """

    wall: Spread
    cpu: Spread
    wall_ratio: Spread = None
    cpu_ratio: Spread = None


def summarize(samples, reference=None):
    """A `Summary` of one case's `Timing`s, per round against `reference`'s."""
    wall = Spread(tuple(t.wall for t in samples))
    cpu = Spread(tuple(t.cpu for t in samples))
    if reference is None:
        return Summary(wall, cpu)
    if len(reference) != len(samples):
        raise ValueError(
            f"{len(samples)} rounds against {len(reference)} of the reference."
        )
    return Summary(
        wall,
        cpu,
        Spread(tuple(t.wall / r.wall for t, r in zip(samples, reference))),
        Spread(tuple(t.cpu / r.cpu for t, r in zip(samples, reference))),
    )


def percent(ratio):
    """A time ratio as the change it is: 1.032 -> '+3.2%'."""
    return f"{(ratio - 1) * 100:+.1f}%"


def machine():
    """'N CPU cores, load average L' of this machine now."""
    return f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}"


def print_table(title, header, rows, align=None):
    """Prints `title`, a blank line and the markdown table; returns both."""
    text = f"{title}\n\n{markdown_table(header, rows, align)}"
    print(f"\n{text}", flush=True)
    return text


def benchmark_flags():
    """{name: value} of the flags the benchmarks define (not absl's own)."""
    return {
        flag.name: flag.value
        for module, module_flags in flags.FLAGS.flags_by_module_dict().items()
        if not module.startswith("absl")
        for flag in module_flags
    }


def write_json(path, samples, **extra):
    """Writes the command line, the machine, date and load average, the
    flags, `samples` (`Timing`s as [wall, cpu]) and `extra` as JSON to
    `path` (nothing if `path` is empty)."""
    if not path:
        return
    report = {
        "command": "python " + " ".join(sys.argv),
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPU cores",
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        # At the end of the run: the 1-, 5- and 15-minute averages.
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "flags": benchmark_flags(),
        "samples": samples,
        **extra,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=dataclasses.astuple)
        f.write("\n")
    print(f"Written to {path}")
