"""tupe-tf: TUPE and DIET positional encodings for keras-hub BERT encoders."""

import pathlib
import re

from setuptools import find_packages
from setuptools import setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "tupe_tf" / "version.py").read_text()
).group(1)

FIGURES = ["matplotlib>=3.8,<4"]
TFDS = ["tensorflow-datasets>=4.9.10,<5"]
# The TUPE authors' tokenization (tupe_tf.TupeFairseqTokenizer): Moses'
# punctuation rules and English non-breaking prefixes.
FAIRSEQ_TEXT = ["sacremoses>=0.2,<0.3"]

setup(
    name="tupe-tf",
    version=VERSION,
    description=(
        "TUPE (Ke et al., ICLR 2021) and DIET (Chen et al., EMNLP 2021) "
        "positional encodings for keras-hub BERT encoders, with a TF-Text "
        "pre-training data pipeline, training scripts and SavedModel export."
    ),
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.13",
    packages=find_packages(
        include=["tupe_tf", "tupe_tf.*", "data_pipeline", "data_pipeline.*"]
    ),
    # Compatible ranges; constraints.txt pins the exact set CI tests.
    # TF-Text's binary matches one TensorFlow minor release, and the
    # package builds on keras-hub's BERT internals and on Keras internals
    # (tupe_tf/layers/keras_internals.py): one minor of each.
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.15,<3.16",
        "keras-hub>=0.32,<0.33",
        "absl-py>=2.1,<3",
        "tensorboard>=2.21,<3",
        "numpy>=1.26,<2.5",
        # The main job's corpus: scripts/pretrain.py without data flags
        # (data_pipeline/default_data.py), and build_vocab.py and
        # build_shards.py without --input, read the English Wikipedia
        # sample embedded in gensim (data_pipeline/corpus.py). Only that
        # corpus imports gensim, but the main job needs it: a base
        # dependency, not an extra.
        "gensim>=4.3,<5",
        # The fast WordPiece learner (also keras-hub requirements).
        "tokenizers>=0.22,<0.24",
        "regex>=2024.4",
        # The study's decision rule, a paired t-test
        # (tupe_tf/analysis/paired_stats.py); gensim needs it too.
        "scipy>=1.11",
    ],
    # What one feature needs beyond the model, the data pipeline and the
    # main job (tupe_tf/utils/extras.py says which feature).
    extras_require={
        "figures": FIGURES,
        "tfds": TFDS,
        "fairseq-text": FAIRSEQ_TEXT,
        "test": [
            *FIGURES,
            *TFDS,
            *FAIRSEQ_TEXT,
            "pytest>=8,<10",
            # Two test processes, one per core of the 2-core machine.
            "pytest-xdist>=3.8,<4",
            "tensorflow-hub>=0.16,<0.17",
            # tensorflow-hub imports pkg_resources, which setuptools 81
            # removed.
            "setuptools>=65,<81",
            "tf-keras>=2.21,<2.22",
            # Imported by keras-hub's TestCase, the base of tests/test_case.py.
            "grain>=0.2,<0.3",
            "ruff>=0.17,<0.18",
        ],
        # The model core on JAX (KERAS_BACKEND=jax); PyTorch is not an
        # extra: PyPI's plain `torch` is a CUDA build of several GB, the
        # README gives the CPU install line.
        "jax": ["jax>=0.7,<0.11"],
        # Reading the TUPE authors' fairseq checkpoints
        # (scripts/convert_fairseq_checkpoint.py); torch's CPU build
        # suffices (the README's install line). 2.6: torch.load's
        # weights-only safe globals under a given name (stand-ins for
        # fairseq's classes).
        "convert": ["torch>=2.6"],
        # ONNX Runtime and LiteRT exports (scripts/export.py --format=onnx,
        # litert): Keras converts through tf2onnx and TensorFlow's LiteRT
        # converter; the runtimes run and check the files.
        "onnx": [
            "tf2onnx>=1.17,<1.18",
            "onnx>=1.17,<2",
            "onnxruntime>=1.20,<2",
        ],
        "litert": ["ai-edge-litert>=2.1,<3"],
        # Data preparation on Apache Beam (--runner). Kept out of the base
        # install: it pins protobuf below 7 (6.33.6 with TF 2.21), under
        # which TensorFlow, TF-Text, keras-hub and tensorboard still work.
        "beam": [
            "apache-beam>=2.77,<3",
        ],
    },
)
