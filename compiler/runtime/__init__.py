"""The search runtime: what a compiled script runs (settings in; a study, best_config.json and best_model.onnx out).

Standard library at import time; amd-quark, optuna, onnxruntime and numpy are imported inside the
functions that need them. `qas compile` copies every module of this package verbatim into
`qas_runtime/` beside the script, so an output folder runs without qas installed. Modules import
each other relatively, so the copy works under its own package name.
"""
