r"""Pre-trains a TUPE/DIET BERT-style encoder with masked-LM (absl flags).

With no data flags, builds a vocabulary and shards from the embedded
Wikipedia sample under --work_dir, pre-trains a tiny TUPE-R on CPU for a few
minutes, evaluates it and saves a keras-hub preset:

  python scripts/pretrain.py

Rerunning the same command resumes from the last checkpoint in --model_dir.
Every flag: --helpfull; multi-worker and TPU runs: docs/training.md.
"""

import json
import os

# TensorFlow reads this as it loads, with the imports below: no C++ INFO,
# WARNING or ERROR lines unless the user sets it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tupe_tf.training import config as config_lib  # noqa: E402
from tupe_tf.training import distribution  # noqa: E402
from tupe_tf.training import pretrain  # noqa: E402
from tupe_tf.utils import cli  # noqa: E402
from tupe_tf.utils import config_flags  # noqa: E402

config_flags.define_flags(config_lib.PretrainConfig)


def print_summary(result):
    results = result.results
    print("\nPre-training finished.")
    print(json.dumps(results["eval"], indent=2))
    print(f"  step:          {results['global_step']}")
    print(f"  preset:        {results['preset_dir']}")
    print(
        f"  checkpoints:   {os.path.join(results['model_dir'], 'checkpoints')}"
    )
    print(f"  TensorBoard:   tensorboard --logdir {results['tensorboard_dir']}")
    print(f"  vocabulary:    {results['vocab_file']}")
    print(
        f"  results:       {os.path.join(results['model_dir'], 'results.json')}"
    )


def main(argv):
    del argv
    config = config_flags.config_from_flags(config_lib.PretrainConfig)
    print(distribution.describe_devices(config.runtime.strategy), flush=True)
    return cli.run_main(pretrain.run_pretraining, config, print_summary)


if __name__ == "__main__":
    cli.run(main)
