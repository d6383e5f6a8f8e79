"""Converting the TUPE authors' fairseq checkpoints to tupe-tf presets.

`convert_checkpoint.convert_fairseq_checkpoint` is the library behind
`scripts/convert_fairseq_checkpoint.py`; `fairseq_checkpoint` reads the
file (with `torch_pickle`: torch's weights-only load, inert stand-ins for
fairseq's classes; torch is the `convert` extra) and maps its `args` to
`TupeBackbone` arguments; `tokenizer_assets` gives the preset the
tokenizer of their pipeline. Layers and models import
nothing from here.
"""
