"""The command-line tools' start-up and exit helpers, in fresh processes."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.large

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def _python(code, **env_overrides):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    env.update(env_overrides)
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_tensorflow_and_text_work_without_the_skipped_modules():
    result = _python("""
      import sys
      from tupe_tf.utils import process_startup
      skipped = process_startup.skip_unused_optional_imports()
      import tensorflow as tf
      import tensorflow_text as tf_text
      tok = tf_text.FastBertTokenizer(["[PAD]", "[UNK]", "ab", "##c"])
      print(skipped, tok.tokenize(["abc"]).flat_values.numpy().tolist(),
            [sys.modules[m] for m in skipped])
      """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "['IPython', 'matplotlib'] [2, 3] [None, None]"
    )


def test_already_imported_modules_are_left_alone():
    result = _python("""
      import json
      from tupe_tf.utils import process_startup
      print(process_startup.skip_unused_optional_imports(("json", "nope_x")))
      import json as again
      print(again.dumps(1))
      """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['nope_x']", "1"]


def test_exit_without_teardown_flushes_and_returns_the_code():
    result = _python("""
      import sys
      from absl import logging
      from tupe_tf.utils import process_startup
      print("to stdout", end="")
      sys.stderr.write("to stderr")
      process_startup.exit_without_teardown(3)
      print("never")
      """)
    assert result.returncode == 3
    assert result.stdout == "to stdout"
    assert "to stderr" in result.stderr


QUIET_TENSORFLOW = """
  import os
  import sys
  from tupe_tf.utils import process_startup
  process_startup.quiet_tensorflow()
  import keras  # Loads TensorFlow, as the scripts' imports do.
  import tensorflow as tf
  print(os.environ["TF_CPP_MIN_LOG_LEVEL"], tf.config.list_physical_devices("CPU")[0].device_type)
  sys.stderr.write("the script's own line\\n")
  """


def test_quiet_tensorflow_leaves_the_script_the_first_line():
    result = _python(QUIET_TENSORFLOW, TF_CPP_MIN_LOG_LEVEL=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 CPU\n"
    # No C++ start-up lines: absl's, cuda_driver's or cuInit's.
    assert result.stderr == "the script's own line\n", result.stderr


def test_a_users_tf_cpp_min_log_level_wins():
    result = _python(QUIET_TENSORFLOW, TF_CPP_MIN_LOG_LEVEL="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1 CPU\n"
    assert result.stderr.endswith("the script's own line\n")


def _refusal_before_tensorflow(script, *arguments):
    """Runs `scripts/<script>` with `arguments` in a fresh process; returns
    the result and whether TensorFlow had loaded when it ended."""
    path = os.path.join(ROOT, "scripts", script)
    result = _python(f"""
      import runpy, sys
      sys.argv = [{path!r}] + {list(arguments)!r}
      try:
          runpy.run_path({path!r}, run_name="__main__")
      finally:
          print("tensorflow" in sys.modules)
      """)
    # A process that had loaded TensorFlow ends without its teardown
    # (`cli.run`), so without printing: only "False" is a refusal before.
    return result, result.stdout.strip() != "False"


@pytest.mark.parametrize(
    "script, argument",
    [
        ("pretrain.py", "--num_train_step=3"),
        ("finetune_glue.py", "--num_epoch=3"),
    ],
)
def test_a_bad_flag_is_refused_before_tensorflow_loads(script, argument):
    result, loaded = _refusal_before_tensorflow(script, argument)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ERROR: Unknown command line flag")
    assert not loaded


def test_export_and_compare_check_their_paths_and_names_first(tmp_path):
    result, loaded = _refusal_before_tensorflow(
        "export.py",
        f"--preset={tmp_path}",
        f"--export_dir={tmp_path}",
        "--format=serving",
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"ERROR: --export_dir={tmp_path} already")
    assert not loaded
    result, loaded = _refusal_before_tensorflow(
        "compare.py",
        "--from_results",
        "--variants=tupe-rr",
        f"--results_dir={tmp_path / 'results'}",
        f"--figures_dir={tmp_path / 'figures'}",
    )
    assert result.returncode == 2, result.stderr
    assert "--variants has unknown names ['tupe-rr']" in result.stderr
    assert not loaded


CLI_RUN = """
  import atexit
  import sys
  from tupe_tf.utils import cli
  from tupe_tf.utils.errors import UserError

  def main(argv):
      atexit.register(print, "teardown ran")
      if {load_tensorflow}:
          import tensorflow  # noqa: F401
      print("done", end="")
      if {error!r}:
          raise UserError({error!r})
      return {code!r}

  cli.run(main)
  """


@pytest.mark.parametrize(
    "load_tensorflow, error, code, returncode",
    [
        (True, None, 0, 0),
        (True, None, 3, 3),
        (True, None, "a message", 1),
        (True, "--seq_length=9 is bad", None, 2),
        (False, None, 3, 3),
    ],
)
def test_cli_run_skips_the_teardown_once_tensorflow_loaded(
    load_tensorflow, error, code, returncode
):
    result = _python(
        CLI_RUN.format(load_tensorflow=load_tensorflow, error=error, code=code)
    )
    assert result.returncode == returncode, result.stderr
    # Flushed before the end; atexit handlers run only without TensorFlow.
    assert result.stdout == "done" + (
        "" if load_tensorflow else "teardown ran\n"
    )
    if error:
        assert result.stderr.endswith(f"ERROR: {error}\n")
    if isinstance(code, str):
        assert result.stderr.endswith(f"{code}\n")
