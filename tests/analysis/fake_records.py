"""Records of the study written by hand, for the tests of its reports."""


def pretraining_record(variant, seed, final):
    """A pre-training record: two evaluations, the last at `final`."""
    return {
        "variant": variant,
        "seed": seed,
        "curve": {"steps": [100, 200], "val_loss": [6.0, final]},
        "final_val_loss": final,
        "heldout_loss_by_length": {},
    }
