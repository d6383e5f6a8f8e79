"""keras-hub's own loaders load tupe-tf presets after `import tupe_tf`.

Keras finds a preset's classes (`tupe_tf>TupeBackbone`, ...) only once they
are registered, which importing `tupe_tf` does: checked in a fresh process
that imports nothing else of the project.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tupe_tf
from tests.sizes import encoder_sizes
from tests.test_case import SPECIAL_TOKENS
from tests.test_case import WORDS

pytestmark = pytest.mark.large

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
VOCAB = SPECIAL_TOKENS + WORDS[:15]
TEXTS = ["the quick fox", "a cat sat"]

# Every loader the README, docs/training.md and the docstrings name, as a
# new user calls it: (name, expression of `keras_hub`, `tupe_tf`, `presets`).
LOADERS = [
    ("Backbone", "keras_hub.models.Backbone.from_preset(presets['backbone'])"),
    (
        "Backbone of a masked LM",
        "keras_hub.models.Backbone.from_preset(presets['masked_lm'])",
    ),
    ("MaskedLM", "keras_hub.models.MaskedLM.from_preset(presets['masked_lm'])"),
    (
        "TextClassifier",
        "keras_hub.models.TextClassifier.from_preset(presets['classifier'])",
    ),
    (
        "TextClassifier of a masked LM",
        "keras_hub.models.TextClassifier.from_preset("
        "presets['masked_lm'], num_classes=2)",
    ),
    (
        "Tokenizer",
        "keras_hub.tokenizers.Tokenizer.from_preset(presets['masked_lm'])",
    ),
    (
        "MaskedLMPreprocessor",
        "keras_hub.models.MaskedLMPreprocessor.from_preset("
        "presets['masked_lm'])",
    ),
    ("TupeBackbone", "tupe_tf.TupeBackbone.from_preset(presets['backbone'])"),
    ("TupeMaskedLM", "tupe_tf.TupeMaskedLM.from_preset(presets['masked_lm'])"),
    (
        "TupeTextClassifier",
        "tupe_tf.TupeTextClassifier.from_preset(presets['classifier'])",
    ),
    (
        "TupeTokenizer",
        "tupe_tf.TupeTokenizer.from_preset(presets['masked_lm'])",
    ),
]

# Prints, per loader, the classes of what it returned and of its
# preprocessor, then the loaded classifier's probabilities.
LOAD = """
  import json
  import sys

  import keras_hub
  import tupe_tf

  presets = json.loads(sys.argv[1])
  loaded = {}
  for name, expression in json.loads(sys.argv[2]):
      model = eval(expression)
      preprocessor = getattr(model, "preprocessor", None)
      loaded[name] = [type(model).__name__, type(preprocessor).__name__]
  classifier = keras_hub.models.TextClassifier.from_preset(
      presets["classifier"]
  )
  probabilities = classifier.predict(json.loads(sys.argv[3]), verbose=0)
  print(json.dumps({"loaded": loaded, "probabilities": probabilities.tolist()}))
  """


def tiny_backbone():
    return tupe_tf.TupeBackbone(
        vocabulary_size=len(VOCAB), max_sequence_length=32, **encoder_sizes(32)
    )


def test_keras_hub_loaders_find_the_classes_after_import_tupe_tf(tmp_path):
    tokenizer = tupe_tf.TupeTokenizer(vocabulary=VOCAB, lowercase=True)
    presets = {
        name: str(tmp_path / name)
        for name in ("backbone", "masked_lm", "classifier")
    }
    tiny_backbone().save_to_preset(presets["backbone"])
    tupe_tf.TupeMaskedLM(
        tiny_backbone(),
        preprocessor=tupe_tf.TupeMaskedLMPreprocessor(
            tokenizer, sequence_length=12
        ),
    ).save_to_preset(presets["masked_lm"])
    classifier = tupe_tf.TupeTextClassifier(
        tiny_backbone(),
        num_classes=3,
        preprocessor=tupe_tf.TupeTextClassifierPreprocessor(
            tokenizer, sequence_length=12
        ),
        activation="softmax",
    )
    classifier.save_to_preset(presets["classifier"])
    expected = classifier.predict(TEXTS, verbose=0)

    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(LOAD),
            json.dumps(presets),
            json.dumps(LOADERS),
            json.dumps(TEXTS),
        ],
        env=dict(os.environ, PYTHONPATH=ROOT),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-4000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    backbone = ["TupeBackbone", "NoneType"]
    masked_lm = ["TupeMaskedLM", "TupeMaskedLMPreprocessor"]
    classifier_classes = [
        "TupeTextClassifier",
        "TupeTextClassifierPreprocessor",
    ]
    assert output["loaded"] == {
        "Backbone": backbone,
        "Backbone of a masked LM": backbone,
        "MaskedLM": masked_lm,
        "TextClassifier": classifier_classes,
        "TextClassifier of a masked LM": classifier_classes,
        "Tokenizer": ["TupeTokenizer", "NoneType"],
        "MaskedLMPreprocessor": ["TupeMaskedLMPreprocessor", "NoneType"],
        "TupeBackbone": backbone,
        "TupeMaskedLM": masked_lm,
        "TupeTextClassifier": classifier_classes,
        "TupeTokenizer": ["TupeTokenizer", "NoneType"],
    }
    np.testing.assert_allclose(output["probabilities"], expected, atol=1e-6)
