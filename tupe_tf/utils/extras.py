"""Optional dependencies, installed with the package's extras.

The base install is what the model, the data pipeline and the main job use.
Each extra of `setup.py` adds what one feature needs:

- `figures`: matplotlib, for the study's figures and `scripts/visualize.py`;
- `tfds`: tensorflow-datasets, for GLUE downloaded from TFDS (`--glue_dir`
  reads the official TSV files without it);
- `beam`: Apache Beam, for `--runner` of the data scripts;
- `convert`: torch, to read fairseq checkpoints
  (`scripts/convert_fairseq_checkpoint.py`);
- `fairseq-text`: sacremoses, for the TUPE authors' tokenization
  (`tupe_tf.TupeFairseqTokenizer`);
- `onnx`: tf2onnx and ONNX Runtime, for `--format=onnx` exports;
- `litert`: the LiteRT interpreter (ai-edge-litert), for `--format=litert`
  exports.

Example:
>>> from tupe_tf.utils import extras
>>> json = extras.import_extra("json", "figures", "drawing figures")
>>> json.dumps([1])
'[1]'
"""

import importlib

from tupe_tf.utils.errors import UserError


def import_extra(module, extra, purpose):
    """Imports `module`, or refuses naming the extra that installs it.

    Args:
        module: the module's import name, e.g. `"matplotlib.pyplot"`.
        extra: the extra of tupe-tf that installs it, e.g. `"figures"`.
        purpose: what needs it, for the message (`"drawing figures"`).

    Returns:
        The module.

    Raises:
        UserError: the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        top_level = module.split(".")[0]
        if error.name != top_level and not module.startswith(f"{error.name}."):
            raise
        raise UserError(
            f"{purpose} needs {top_level}, which is not installed: "
            f"pip install 'tupe-tf[{extra}]'."
        ) from error
