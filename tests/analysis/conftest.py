import pytest

from tests.analysis.micro_study import build_tiny_data


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """The micro study's data (`micro_study.build_tiny_data`), once per
    module."""
    return build_tiny_data(tmp_path_factory.mktemp("compare_data"))
