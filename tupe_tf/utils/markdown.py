"""Markdown tables: the one renderer of the project's generated tables."""

_SEPARATORS = {None: "---", "left": ":---", "right": "---:", "center": ":---:"}


def _cell(value):
    # A `|` inside a cell would end the cell: escape it.
    return str(value).replace("|", "\\|")


def markdown_table(header, rows, align=None):
    """A GitHub-flavoured markdown table, one line per row.

    Args:
        header: the column names.
        rows: sequences of cells, each as long as `header`; a cell is
            written as `str(cell)`, with `|` escaped.
        align: `None` (markdown's default alignment for every column), or
            one entry per column: `None`, "left", "right" or "center".

    Returns:
        The table's lines joined by newlines, without a final newline.

    Raises:
        ValueError: a row or `align` is not as long as `header`, or an
            alignment is unknown.

    Example:

    >>> print(markdown_table(["variant", "loss"], [["bert", "5.837"]]))
    | variant | loss |
    | --- | --- |
    | bert | 5.837 |
    """
    header = list(header)
    align = [None] * len(header) if align is None else list(align)
    if len(align) != len(header):
        raise ValueError(
            f"{len(align)} alignments for {len(header)} columns: {align}."
        )
    unknown = [a for a in align if a not in _SEPARATORS]
    if unknown:
        raise ValueError(
            f"Unknown alignment(s) {unknown}; valid: {list(_SEPARATORS)}."
        )
    lines = [
        _row(_cell(h) for h in header),
        _row(_SEPARATORS[a] for a in align),
    ]
    for row in rows:
        cells = [_cell(c) for c in row]
        if len(cells) != len(header):
            raise ValueError(
                f"A row of {len(cells)} cells in a table of {len(header)} "
                f"columns: {cells}."
            )
        lines.append(_row(cells))
    return "\n".join(lines)


def _row(cells):
    return "| " + " | ".join(cells) + " |"
