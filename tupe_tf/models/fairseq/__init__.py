"""The TUPE authors' fairseq pipeline, for their checkpoints as presets.

Their tokenization (`TupeFairseqTokenizer`: `fairseq_glue_text` with
`moses_text` for their GLUE cleanup and Moses scripts, `fastbpe_codes` for
fastBPE, `fairseq_dictionary` for their `dict.txt`), its pair layout
(`TupeFairseqTextClassifierPreprocessor`) and their BERT's state dict on a
`TupeBackbone` (`load_tupe_reference_weights`). A converted preset loads
with these and neither torch nor fairseq; `tupe_tf.convert` (torch) reads
their checkpoint files and writes such presets.
"""

from tupe_tf.models.fairseq.tupe_fairseq_text_classifier_preprocessor import (
    TupeFairseqTextClassifierPreprocessor,
)
from tupe_tf.models.fairseq.tupe_fairseq_tokenizer import TupeFairseqTokenizer
from tupe_tf.models.fairseq.tupe_reference_weights import (
    load_tupe_reference_weights,
)
