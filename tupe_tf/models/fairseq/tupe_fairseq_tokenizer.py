"""Tokenizer of the TUPE authors' fairseq pipeline, for converted presets."""

import os

import keras
import numpy as np
from keras_hub.tokenizers import Tokenizer

from tupe_tf.layers import keras_hub_internals
from tupe_tf.models.fairseq.fairseq_dictionary import read_fairseq_dictionary
from tupe_tf.models.fairseq.fairseq_glue_text import glue_words
from tupe_tf.models.fairseq.fastbpe_codes import FastBpeCodes
from tupe_tf.models.tupe_backbone import TupeBackbone
from tupe_tf.utils.keyword_arguments import PRESET_KEYWORDS
from tupe_tf.utils.keyword_arguments import refuse_unknown_keywords

try:
    import tensorflow as tf
except ImportError:
    # As keras-hub's tokenizers: the model core imports (and tokenizes in
    # Python) on a JAX or PyTorch machine without TensorFlow.
    tf = None

DICTIONARY_FILE = "dict.txt"
CODES_FILE = "bpe-code"
# fairseq's Dictionary: ids fixed before dict.txt is read (unknown symbols
# get this id even if dict.txt lists "<unk>" again).
UNKNOWN_ID = 3
SPECIAL_TOKENS = (
    ("<s>", "start_token"),
    ("</s>", "end_token"),
    ("<pad>", "pad_token"),
    ("<unk>", "unk_token"),
    ("<mask>", "mask_token"),
)


@keras.saving.register_keras_serializable(package="tupe_tf")
class TupeFairseqTokenizer(Tokenizer):
    """The token ids the TUPE authors' GLUE pipeline gives a text.

    Their `preprocess/glue/process.sh` (guolinke/TUPE): their cleanup
    scripts, Moses punctuation normalization, non-printing character
    removal and `tokenizer.perl -no-escape -l en`, lowercasing, fastBPE
    `applybpe` with their codes, then their fairseq dictionary (`<s>`=0,
    `<pad>`=1, `</s>`=2, `<unk>`=3, `<file>`, `<email>`, `<url>`, the
    lines of `dict.txt`, then `<mask>`). The ids exclude `</s>`, which the
    preprocessors' packers add: `<s> a </s>`, or `<s> a </s> </s> b </s>`
    for pairs (`TupeFairseqTextClassifierPreprocessor`).

    The text steps are Python (they need the `fairseq-text` extra), not
    TensorFlow ops: inside a `tf.data` pipeline or a `tf.function` they run
    through `tf.py_function`, so a graph that tokenizes cannot be exported
    as a SavedModel; export the model on token ids. Inputs: one string or
    a rank-1 batch (bytes are decoded as UTF-8, invalid bytes dropped, as
    their pipeline does).

    Args:
        dictionary: path of their fairseq `dict.txt` (`token count`
            lines), or None when the assets come from a preset.
        bpe_codes: path of their fastBPE codes (`bpe-code`), or None.
        **kwargs: other arguments of `keras_hub.tokenizers.Tokenizer`
            (`name`, `dtype`: an integer dtype, default int32).

    Example:
    ```python
    tokenizer = tupe_tf.TupeFairseqTokenizer(
        dictionary="tupe/dict.txt", bpe_codes="tupe/bpe-code")
    tokenizer(["It's a test.", "Another one"])  # a list of id lists
    tokenizer.save_to_preset("preset")  # dict.txt and bpe-code as assets
    ```
    """

    backbone_cls = TupeBackbone

    def __init__(self, dictionary=None, bpe_codes=None, **kwargs):
        # keras would refuse a misspelt keyword without the closest name.
        refuse_unknown_keywords(
            TupeFairseqTokenizer,
            kwargs,
            extra_valid=PRESET_KEYWORDS,
            parents=(Tokenizer, keras.layers.Layer),
        )
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.file_assets = [DICTIONARY_FILE, CODES_FILE]
        self.symbols = None
        for token, name in SPECIAL_TOKENS:
            keras_hub_internals.add_special_token(self, token, name)
        self.set_assets(dictionary, bpe_codes)

    def set_assets(self, dictionary, bpe_codes):
        """Reads `dictionary` (`dict.txt`) and `bpe_codes`: both or none."""
        if (dictionary is None) != (bpe_codes is None):
            raise ValueError(
                "TupeFairseqTokenizer needs both `dictionary` and "
                f"`bpe_codes`; got dictionary={dictionary!r}, "
                f"bpe_codes={bpe_codes!r}."
            )
        if dictionary is None:
            return
        self.symbols = read_fairseq_dictionary(dictionary, flag="dictionary")
        self.codes = FastBpeCodes(bpe_codes)
        # fairseq's lookup: a symbol listed twice answers with its last id.
        self._ids = {symbol: i for i, symbol in enumerate(self.symbols)}
        self._asset_bytes = {}
        for name, path in (
            (DICTIONARY_FILE, dictionary),
            (CODES_FILE, bpe_codes),
        ):
            with open(path, "rb") as file:
                self._asset_bytes[name] = file.read()
        keras_hub_internals.update_special_token_ids(self)

    def _check_assets(self):
        if self.symbols is None:
            raise ValueError(
                "No dictionary and codes are set on TupeFairseqTokenizer: "
                "pass `dictionary` and `bpe_codes`, or load a preset."
            )

    def save_assets(self, dir_path):
        self._check_assets()
        for name, content in self._asset_bytes.items():
            with open(os.path.join(dir_path, name), "wb") as file:
                file.write(content)

    def load_assets(self, dir_path):
        self.set_assets(
            os.path.join(dir_path, DICTIONARY_FILE),
            os.path.join(dir_path, CODES_FILE),
        )

    def get_vocabulary(self):
        self._check_assets()
        return list(self.symbols)

    def vocabulary_size(self):
        self._check_assets()
        return len(self.symbols)

    def id_to_token(self, id):
        self._check_assets()
        return self.symbols[id]

    def token_to_id(self, token):
        self._check_assets()
        return self._ids.get(token, UNKNOWN_ID)

    def encode(self, text):
        """The ids of one text (str or UTF-8 bytes), without `</s>`."""
        self._check_assets()
        return [
            self._ids.get(symbol, UNKNOWN_ID)
            for word in glue_words(text)
            for symbol in self.codes.split_word(word)
        ]

    def _encode_batch(self, texts):
        encoded = [self.encode(text) for text in texts.numpy()]
        values = np.fromiter(
            (i for ids in encoded for i in ids), self.compute_dtype
        )
        return values, np.array([len(ids) for ids in encoded], "int64")

    def _tokenize_tf(self, inputs):
        inputs = tf.convert_to_tensor(inputs, tf.string)
        if inputs.shape.rank not in (0, 1):
            raise ValueError(
                "TupeFairseqTokenizer takes a string or a rank-1 batch of "
                f"strings; got shape {inputs.shape}."
            )
        values, lengths = tf.py_function(
            self._encode_batch,
            [tf.reshape(inputs, [-1])],
            [tf.as_dtype(self.compute_dtype), tf.int64],
        )
        ids = tf.RaggedTensor.from_row_lengths(
            tf.ensure_shape(values, [None]), tf.ensure_shape(lengths, [None])
        )
        return ids[0] if inputs.shape.rank == 0 else ids

    def _tokenize_python(self, inputs):
        if tf is not None and isinstance(inputs, tf.Tensor):
            inputs = inputs.numpy()
        if isinstance(inputs, np.ndarray):
            inputs = inputs.tolist()
        if isinstance(inputs, (str, bytes)):
            return np.array(self.encode(inputs), self.compute_dtype)
        return [self.encode(text) for text in inputs]

    def tokenize(self, inputs):
        if keras_hub_internals.use_tf_workflow(self):
            return self._tokenize_tf(inputs)
        return self._tokenize_python(inputs)

    def get_config(self):
        config = super().get_config()
        # Saved as assets, not as paths.
        config.update({"dictionary": None, "bpe_codes": None})
        return config
