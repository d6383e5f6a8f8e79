"""Generic helpers that every other package of tupe-tf may import.

They import only the standard library and absl (no TensorFlow, Keras or
model code), so that `tupe_tf.layers`, `tupe_tf.models`, `tupe_tf.training`
and `data_pipeline` all build on them without importing one another:
user errors (`errors`), the scripts' runner (`cli`), settings of config
dataclasses and their checks (`settings`, free of absl, so that layers and
models use it too), the backbone's option table (`backbone_options`), flags
generated from config dataclasses (`config_flags`), refusal of misspelt keywords
(`keyword_arguments`), atomic file output (`fileio`), process start-up
(`process_startup`) and markdown tables (`markdown`).
"""
