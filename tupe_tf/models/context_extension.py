"""Copying a trained model's weights into one built for longer sequences.

A model rebuilt with a larger `max_sequence_length` has the same variables
as the trained one; only the tables with one row per position (or per
offset) are longer. `copy_weights` copies every variable by its path and
grows those tables with `grow_length_table`, the one statement of the rule
(docs/spec.md, "Context extension"), from their trained rows (a model
trained at length `T` below its `max_sequence_length` has trained only the
first `T`):

- an absolute table (`bert`'s input positions, `tupe-*` and `bert-ad`'s
  untied table `p`, `diet-abs`'s `P_Q`, `P_K`) keeps its trained rows and
  fills the new ones by repeating them, as Longformer (Beltagy et al., 2020)
  did: every position keeps trained neighbours, so the model's local
  attention patterns hold at once (rows before token 0's, such as TUPE's
  `[CLS]` rows, stay as they are);
- a relative table (`diet-rel`'s offsets `-(N-1) .. N-1`) keeps its trained
  offsets and gives each new, farther one the value of the farthest trained
  offset on its side, as T5 buckets and Shaw et al. clip distances.

Every other option has no weight whose shape depends on the length.

Example:

>>> import numpy as np
>>> grow_length_table(np.arange(3), 7, axis=0).tolist()
[0, 1, 2, 0, 1, 2, 0]
"""

import keras
import numpy as np
from keras_hub.layers import PositionEmbedding

ABSOLUTE = "absolute"
RELATIVE = "relative"

# keras-hub's learned input table (`bert`, `bert-r`, and `BertBackbone`).
_FOREIGN_LENGTH_TABLES = {
    PositionEmbedding: {"position_embeddings": (0, ABSOLUTE)},
}


def grow_length_table(
    table, new_length, axis, layout=ABSOLUTE, leading=0, trained_length=None
):
    """A position table grown to `new_length` positions (the rule).

    Args:
        table: array whose `axis` holds `leading` extra rows and then one
            row per position (`absolute`), or the `2N - 1` offsets
            `-(N-1) .. N-1` in order (`relative`).
        new_length: int. The new number of positions, at least the trained.
        axis: int. The position axis.
        layout: `absolute` (trained rows repeated: row `leading + i` of the
            result is trained row `leading + i mod T`) or `relative` (new
            offsets take the value of the farthest trained one on their
            side).
        leading: int. For `absolute`: rows before position 0 (TUPE's
            `[CLS]` row), copied as they are.
        trained_length: int or None. `T`, the length the table was trained
            at: positions (offsets) from `T` on never had a gradient and are
            refilled by the rule too. Default: the whole table.

    Returns:
        A NumPy array, the same as `table` along every other axis.

    Raises:
        ValueError: `new_length` is below the trained length.

    Example:

    >>> grow_length_table(np.array([5, 6, 7]), 3, axis=0, layout="relative")
    array([5, 5, 6, 7, 7])
    """
    table = np.moveaxis(np.asarray(table), axis, 0)
    if layout == ABSOLUTE:
        length = table.shape[0] - leading
    else:
        length = (table.shape[0] + 1) // 2
    trained = min(trained_length or length, length)
    if new_length < trained:
        raise ValueError(
            f"A position table of {trained} trained positions cannot grow "
            f"to {new_length}: shrinking drops trained positions."
        )
    if layout == ABSOLUTE:
        head, rows = table[:leading], table[leading : leading + trained]
        repeats = -(-new_length // trained)
        tiled = np.tile(rows, (repeats,) + (1,) * (rows.ndim - 1))
        grown = np.concatenate([head, tiled[:new_length]])
    else:
        rows = table[length - trained : length + trained - 1]
        extra = new_length - trained
        grown = np.concatenate(
            [
                np.repeat(rows[:1], extra, axis=0),
                rows,
                np.repeat(rows[-1:], extra, axis=0),
            ]
        )
    return np.moveaxis(grown, 0, axis)


def length_tables(model):
    """`model`'s length-bound weights: `{path: (axis, layout, positions)}`.

    Each layer class with such weights declares them in its
    `length_tables` attribute (`{attribute: (axis, layout)}`) and holds its
    `max_sequence_length`; keras-hub's `PositionEmbedding` (whose length is
    `sequence_length`) is declared here. Such layers are layers of the
    model's functional graph (or of a model in it), as in every backbone
    and task here: they are found through `Model.layers`.
    """
    tables = {}
    for layer in _graph_layers(model):
        declared = getattr(type(layer), "length_tables", None)
        if declared is None:
            declared = _FOREIGN_LENGTH_TABLES.get(type(layer), {})
        positions = getattr(
            layer, "max_sequence_length", getattr(layer, "sequence_length", 0)
        )
        for attribute, (axis, layout) in declared.items():
            variable = getattr(layer, attribute, None)
            if variable is not None:
                tables[variable.path] = (axis, layout, int(positions))
    return tables


def _graph_layers(model):
    """`model.layers` and, recursively, the layers of the models among them.

    Keras has no public list of every nested layer (a layer's own
    sublayers, such as a transformer layer's dense layers, are not in it);
    the layers holding position tables are the graph's own.
    """
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _graph_layers(layer)


def copy_weights(source, target, trained_length=None):
    """Copies `source`'s weights into `target` by path, growing tables.

    Both are built Keras models of the same layer structure (e.g. a
    `TupeBackbone` or `TupeMaskedLM` and its rebuild with a larger
    `max_sequence_length` or another `rope_max_wavelength`). A variable
    of the same shape is copied; a length-bound one (`length_tables`)
    longer in the target, or trained at a shorter length than its rows,
    is grown with `grow_length_table`; a target variable without a source
    counterpart keeps its initial value.

    Args:
        source: the trained model.
        target: the model to fill.
        trained_length: int or None. The length `source` was trained at,
            when below its `max_sequence_length`: its table rows from there
            on are refilled by the rule (`grow_length_table`).

    Returns:
        `(grown, new)`: `{path: [trained positions, new positions]}` of the
        grown tables and the sorted paths of the target variables not
        copied.

    Raises:
        ValueError: a variable's shape differs in a way the rule does not
            cover (another width or vocabulary, or a shorter target),
            naming the variable and both shapes.

    Example:
    ```python
    trained = tupe_tf.TupeBackbone.from_preset("runs/tupe-a/model/preset")
    longer = tupe_tf.TupeBackbone.from_config(
        {**trained.get_config(), "max_sequence_length": 1024})
    grown, new = copy_weights(trained, longer)
    ```
    """
    sources = {variable.path: variable for variable in source.weights}
    source_tables = length_tables(source)
    target_tables = length_tables(target)
    grown, new = {}, []
    for variable in target.weights:
        path = variable.path
        if path not in sources:
            new.append(path)
            continue
        value = np.asarray(sources[path].numpy())
        old, length = source_tables.get(path), target_tables.get(path)
        refill = old is not None and (trained_length or old[2]) < old[2]
        if tuple(value.shape) != tuple(variable.shape) or refill:
            if old is None or length is None or old[:2] != length[:2]:
                raise _mismatch(path, value.shape, variable.shape)
            trained = min(trained_length or old[2], old[2])
            value = _grown(path, value, variable.shape, old, length[2], trained)
            grown[path] = [trained, length[2]]
        variable.assign(value)
    return grown, sorted(new)


def _mismatch(path, source_shape, target_shape):
    return ValueError(
        f"Cannot copy `{path}`: shape {tuple(source_shape)} in the source, "
        f"{tuple(target_shape)} in the target, and only a position table "
        "may grow (to a longer max_sequence_length)."
    )


def _grown(path, value, shape, source_table, new, trained):
    """`value` grown by the rule to `shape` (`new` positions from the
    first `trained` of the source's), or `_mismatch` when the rule does not
    give that shape."""
    axis, layout, old = source_table
    leading = value.shape[axis] - old if layout == ABSOLUTE else 0
    if new >= trained:
        grown = grow_length_table(value, new, axis, layout, leading, trained)
        if grown.shape == tuple(shape):
            return grown
    raise _mismatch(path, value.shape, shape)
