"""Generic helpers that every other package of tupe-tf may import.

They import no model, training or data code, so that `tupe_tf.layers`,
`tupe_tf.models`, `tupe_tf.training` and `data_pipeline` all build on them
without importing one another (importing any of them still runs
`tupe_tf/__init__.py`, which loads the models and Keras). User errors
(`errors`), the scripts' runner (`cli`), settings of config dataclasses
and their checks (`settings`), the backbone's option table
(`backbone_options`), flags from config dataclasses (`config_flags`),
atomic file output (`fileio`; its URL side, through `tf.io.gfile`:
`url_files`) and markdown tables (`markdown`).
"""
