r"""Converts a TUPE authors' fairseq checkpoint to a tupe-tf preset.

Reads the `.pt` file their train.py writes (guolinke/TUPE, fairseq 0.8,
e.g. the released BERT-base TUPE-R) without fairseq and without running
anything pickled in it, and writes a keras-hub preset that
`tupe_tf.TupeMaskedLM.from_preset(--output)` loads: their encoder and
masked-LM head, in the token ids of their dictionary. Needs torch
(`pip install -e ".[convert]"`).

Example:
  python scripts/convert_fairseq_checkpoint.py \
      --checkpoint=tupe/checkpoint_best.pt --dict=tupe/dict.txt \
      --output=presets/tupe_r_base
"""

import dataclasses
import os
from typing import Optional

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import flags  # noqa: E402

from tupe_tf.convert import convert_checkpoint  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402
from tupe_tf.utils.keyword_arguments import refuses_unknown_fields  # noqa: E402
from tupe_tf.utils.settings import Settings  # noqa: E402
from tupe_tf.utils.settings import setting  # noqa: E402


@refuses_unknown_fields
@dataclasses.dataclass
class ConvertSettings(Settings):
    """The flags: `convert_fairseq_checkpoint`'s arguments."""

    checkpoint: str = setting(
        "",
        help="The .pt file of their train.py (Trainer.save_checkpoint).",
        required=True,
    )
    dict: str = setting(
        "",
        help="Their fairseq dictionary (dict.txt of the pre-training data).",
        required=True,
    )
    output: str = setting(
        "", help="The preset directory to write.", required=True
    )
    bpe_codes: Optional[str] = setting(
        None,
        help="Their fastBPE codes (bpe-code), for the preset's tokenizer.",
    )
    overwrite: bool = setting(False, help="Replace an existing --output.")


config_flags.define_flags(ConvertSettings)


def convert(settings):
    settings.validate()
    return convert_checkpoint.convert_fairseq_checkpoint(
        settings.checkpoint,
        settings.dict,
        settings.output,
        bpe_codes=settings.bpe_codes,
        overwrite=settings.overwrite,
    )


def summary(conversion):
    backbone = conversion.backbone
    tokenizer = "no tokenizer (token ids in)"
    if conversion.bpe_merges_in_dictionary is not None:
        found, merges = conversion.bpe_merges_in_dictionary
        tokenizer = (
            f"their tokenizer ({found} of {merges} BPE merges in the "
            "dictionary)"
        )
    print(
        f"Wrote {conversion.output}: {backbone['position_encoding']}, "
        f"{backbone['num_layers']} layers x {backbone['hidden_dim']}, "
        f"{backbone['vocabulary_size']} token ids, weights stored as "
        f"{'/'.join(conversion.stored_dtypes)} (now float32), {tokenizer}; "
        f"left out: {', '.join(conversion.left_out)}."
    )


def main(argv):
    del argv  # cli.run refuses arguments that are not flags.
    return cli.run_main(
        lambda values: convert(
            config_flags.config_from_flags(ConvertSettings, values)
        ),
        flags.FLAGS,
        summary,
    )


if __name__ == "__main__":
    cli.run(main)
