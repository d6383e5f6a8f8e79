"""How the scripts start and end, in fresh processes: TensorFlow's C++ log
level, the refusal of a bad flag, the device line of the training scripts
and `cli.run`'s exit."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.large

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
SCRIPTS = (
    "build_shards.py",
    "build_vocab.py",
    "compare.py",
    "convert_fairseq_checkpoint.py",
    "export.py",
    "finetune_glue.py",
    "pretrain.py",
    "visualize.py",
)


def _python(code, cwd=None, **env_overrides):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.update(env_overrides)
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def _run_script(script, *arguments, cwd=None, **env_overrides):
    """Runs `scripts/<script>` with `arguments` in a fresh process, which
    prints its `TF_CPP_MIN_LOG_LEVEL` last, once the script has ended."""
    path = os.path.join(ROOT, "scripts", script)
    return _python(
        f"""
        import os, runpy, sys
        sys.argv = [{path!r}] + {list(arguments)!r}
        try:
            runpy.run_path({path!r}, run_name="__main__")
        finally:
            print(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
        """,
        cwd=cwd,
        **env_overrides,
    )


def _error_lines(result):
    return [
        line for line in result.stderr.splitlines() if line.startswith("ERROR:")
    ]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_flag_is_one_error_line_and_nothing_written(script, tmp_path):
    result = _run_script(
        script, "--num_train_step=3", cwd=tmp_path, TF_CPP_MIN_LOG_LEVEL=None
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [error] = _error_lines(result)
    assert error.startswith("ERROR: Unknown command line flag 'num_train_step'")
    assert os.listdir(tmp_path) == []
    # The scripts quiet TensorFlow's C++ logging unless the user set it.
    assert result.stdout.splitlines()[-1] == "3"


def test_a_users_tf_cpp_min_log_level_wins():
    result = _run_script("pretrain.py", "--nope=1", TF_CPP_MIN_LOG_LEVEL="1")
    assert result.returncode == 2, result.stderr
    assert result.stdout.splitlines()[-1] == "1"


def test_export_and_compare_check_their_paths_and_names_first(tmp_path):
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "kept").write_text("")
    result = _run_script(
        "export.py",
        f"--preset={tmp_path}",
        f"--export_dir={export_dir}",
        "--format=serving",
    )
    assert result.returncode == 2, result.stderr
    [error] = _error_lines(result)
    assert error.startswith(f"ERROR: --export_dir={export_dir} already")
    assert os.listdir(export_dir) == ["kept"]
    result = _run_script(
        "compare.py",
        "--from_results",
        "--variants=tupe-rr",
        f"--results_dir={tmp_path / 'results'}",
        f"--figures_dir={tmp_path / 'figures'}",
    )
    assert result.returncode == 2, result.stderr
    [error] = _error_lines(result)
    assert "--variants has unknown names ['tupe-rr']" in error
    assert sorted(os.listdir(tmp_path)) == ["export"]


@pytest.mark.parametrize(
    "script, arguments",
    [
        ("pretrain.py", ["--train_files=missing/*", "--model_dir=model"]),
        (
            "finetune_glue.py",
            ["--task=cola", "--preset=missing", "--glue_dir=missing"],
        ),
    ],
)
def test_training_scripts_first_say_which_devices_they_train_on(
    script, arguments, tmp_path
):
    result = _run_script(script, *arguments, cwd=tmp_path)
    # Refused on its files, after the device line.
    assert result.returncode == 2, result.stderr
    assert len(_error_lines(result)) == 1, result.stderr
    assert result.stdout.startswith("training on "), result.stdout


CLI_RUN = """
  import atexit
  import sys
  from tupe_tf.utils import cli
  from tupe_tf.utils.errors import UserError

  def main(argv):
      atexit.register(print, "atexit ran")
      print("done", end="")
      if {error!r}:
          raise UserError({error!r})
      return {code!r}

  cli.run(main)
  """


@pytest.mark.parametrize(
    "error, code, returncode",
    [
        (None, 0, 0),
        (None, None, 0),
        (None, 3, 3),
        (None, "a message", 1),
        ("--seq_length=9 is bad", None, 2),
    ],
)
def test_cli_run_ends_the_process_as_python_does(error, code, returncode):
    result = _python(CLI_RUN.format(error=error, code=code))
    assert result.returncode == returncode, result.stderr
    # Python's own exit: flushed streams, then the atexit handlers.
    assert result.stdout == "doneatexit ran\n"
    if error:
        assert result.stderr.endswith(f"ERROR: {error}\n")
    if isinstance(code, str):
        assert result.stderr.endswith(f"{code}\n")
