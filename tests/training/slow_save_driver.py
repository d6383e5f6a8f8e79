"""scripts/pretrain.py whose preemption save hangs half-written.

Usage: python slow_save_driver.py MARKER_FILE [pretrain.py flags].

Once the run has received SIGTERM (the preemption handler has given
SIGTERM its default action back), `CheckpointManager.save` writes a
`ckpt-<N>_temp` directory as a real save begins, creates MARKER_FILE and
waits: the test sends the second SIGTERM into that save.
"""

import os
import runpy
import signal
import sys
import time


def main(marker, argv):
    import tensorflow as tf

    save = tf.train.CheckpointManager.save

    def save_that_hangs_after_sigterm(manager, checkpoint_number=None, **kw):
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return save(manager, checkpoint_number=checkpoint_number, **kw)
        temp = os.path.join(manager.directory, f"ckpt-{checkpoint_number}_temp")
        os.makedirs(temp)
        with open(os.path.join(temp, "part-00000-of-00001.index"), "wb") as f:
            f.write(b"half")
        with open(marker, "w") as f:
            f.write(str(checkpoint_number))
        time.sleep(120)
        raise AssertionError("the second SIGTERM did not end the run")

    tf.train.CheckpointManager.save = save_that_hangs_after_sigterm
    script = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        "scripts",
        "pretrain.py",
    )
    sys.argv = [script] + argv
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
