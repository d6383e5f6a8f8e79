import pytest
from absl import app

from tupe_tf.training import cli
from tupe_tf.training.callbacks import NonFiniteLossError
from tupe_tf.training.config import InvalidInputError


@pytest.mark.parametrize(
    "error, code",
    [
        (InvalidInputError("--seq_length=9 is bad"), 2),
        # What config_flags.validated_config_from_flags raises.
        (app.UsageError("--seq_length must be >= 3."), 2),
        (NonFiniteLossError("nan"), 3),
    ],
)
def test_errors_become_one_line_and_an_exit_code(error, code, capsys):
    def failing(config):
        raise error

    summaries = []
    assert cli.run_main(failing, None, summaries.append) == code
    assert capsys.readouterr().err == f"ERROR: {error}\n"
    assert summaries == []


def test_success_prints_the_summary_of_the_result():
    summaries = []
    assert cli.run_main(lambda config: config * 2, 21, summaries.append) == 0
    assert summaries == [42]
