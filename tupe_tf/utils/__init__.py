"""Generic helpers that every other package of tupe-tf may import.

They import no model, training or data code, so that `tupe_tf.layers`,
`tupe_tf.models`, `tupe_tf.training` and `data_pipeline` all build on them
without importing one another; most need only the standard library (absl
for `cli` and `config_flags`, Keras for `backend`, TensorFlow for a remote
path in `fileio`). User errors (`errors`), the scripts' runner (`cli`),
settings of config dataclasses and their checks (`settings`), the
backbone's option table (`backbone_options`), flags from config
dataclasses (`config_flags`), atomic file output (`fileio`), process
start-up (`process_startup`), packages' names loaded on first use
(`lazy_names`) and markdown tables (`markdown`).
"""
