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

from tupe_tf.utils import process_startup

# Before TensorFlow loads (see tupe_tf/utils/process_startup.py).
process_startup.quiet_tensorflow()
process_startup.skip_unused_optional_imports()

from tupe_tf.training import config as config_lib  # noqa: E402
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
    # TensorFlow loads here, after the flags are read (a bad flag is
    # refused at once).
    from tupe_tf.training import pretrain

    return cli.run_main(pretrain.run_pretraining, config, print_summary)


if __name__ == "__main__":
    cli.run(main)
