import pytest

from tupe_tf.utils.markdown import markdown_table


def test_a_known_table_is_rendered_line_by_line():
    table = markdown_table(
        ["variant", "loss", "seeds"],
        [["bert", 5.837, "0,1,2"], ["a|b", "4.835 [4.784, 4.910]", ""]],
        align=[None, "right", "center"],
    )
    assert table == (
        "| variant | loss | seeds |\n"
        "| --- | ---: | :---: |\n"
        "| bert | 5.837 | 0,1,2 |\n"
        "| a\\|b | 4.835 [4.784, 4.910] |  |"
    )
    assert markdown_table(["a"], []) == "| a |\n| --- |"


def test_rows_and_alignments_must_match_the_header():
    with pytest.raises(ValueError, match="2 cells in a table of 3 columns"):
        markdown_table(["a", "b", "c"], [["x", "y"]])
    with pytest.raises(ValueError, match="1 alignments for 2 columns"):
        markdown_table(["a", "b"], [], align=["left"])
    with pytest.raises(ValueError, match="Unknown alignment"):
        markdown_table(["a"], [], align=["middle"])
