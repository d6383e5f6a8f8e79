"""Converting the TUPE authors' fairseq checkpoints to tupe-tf presets.

`convert_checkpoint.convert_fairseq_checkpoint` is the library behind
`scripts/convert_fairseq_checkpoint.py`; `fairseq_checkpoint` reads the
file (with `torch_pickle`: torch's weights-only load, inert stand-ins for
fairseq's classes; torch is the `convert` extra) and maps its `args` to
`TupeBackbone` arguments; `tokenizer_assets` gives the preset the
tokenizer of their pipeline. What a converted preset needs to load (their
tokenization, its pair layout, their state dict on a `TupeBackbone`) is
`tupe_tf.models.fairseq`, without torch; layers and models import nothing
from here.
"""
