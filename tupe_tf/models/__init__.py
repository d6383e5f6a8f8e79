"""keras-hub models of tupe-tf (`fairseq/`: the TUPE authors' pipeline)."""

from tupe_tf.models.bert_weights import load_bert_weights
from tupe_tf.models.fairseq import TupeFairseqTextClassifierPreprocessor
from tupe_tf.models.fairseq import TupeFairseqTokenizer
from tupe_tf.models.fairseq import load_tupe_reference_weights
from tupe_tf.models.preset_check import check_preset
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.models.tupe_masked_lm import TupeMaskedLM
from tupe_tf.models.tupe_masked_lm_preprocessor import TupeMaskedLMPreprocessor
from tupe_tf.models.tupe_text_classifier import TupeTextClassifier
from tupe_tf.models.tupe_text_classifier_preprocessor import (
    TupeTextClassifierPreprocessor,
)
from tupe_tf.models.tupe_tokenizer import TupeTokenizer
from tupe_tf.utils.backbone_options import POSITION_ENCODINGS
from tupe_tf.utils.backbone_options import POSITION_SHARINGS
from tupe_tf.utils.backbone_options import SEGMENT_ENCODINGS
