"""`qas report`: a search output dir in; the run as JSON-ready data, a terminal block, or plots and report.md out.

Reads run_manifest.yaml, the Optuna study (opened read-only) and best_config.json; never changes them.
The modules, each one step: manifest (run_manifest.yaml read and checked), studies (the study DB read,
importances), facts (the report as data), text (the terminal view), files (report.md and plots written).
Optuna, matplotlib, jsonschema, jinja2 and ruamel are imported inside functions so importing stays cheap.
"""

from __future__ import annotations

from compiler.report.collect import build_report
from compiler.report.outputs import write_report_files
from compiler.report.studies import load_studies
from compiler.report.text import report_text

__all__ = ["build_report", "load_studies", "report_text", "write_report_files"]
