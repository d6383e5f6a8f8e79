"""One worker of the 2-process MultiWorkerMirroredStrategy test.

Usage: python multi_worker_driver.py CONFIG_JSON OUTPUT_NPZ (TF_CONFIG set).
Runs `run_pretraining` and saves this worker's final weights and results.
"""

import json
import sys


def main(config_path, output_path):
    from tupe_tf.training import config as config_lib

    with open(config_path) as f:
        raw = json.load(f)
    config = config_lib.PretrainConfig(
        **{
            k: v
            for k, v in raw.items()
            if k not in ("model", "optimizer", "runtime")
        },
        model=config_lib.ModelConfig(**raw["model"]),
        optimizer=config_lib.OptimizerConfig(**raw["optimizer"]),
        runtime=config_lib.RuntimeConfig(**raw["runtime"]),
    )
    # TensorFlow starts inside: the strategy is created before anything else.
    import numpy as np

    from tupe_tf.training import run_pretraining

    result = run_pretraining(config)
    weights = {
        f"w{i:04d}": np.asarray(w)
        for i, w in enumerate(result.model.get_weights())
    }
    np.savez(output_path, **weights)
    with open(output_path + ".json", "w") as f:
        json.dump(result.results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
