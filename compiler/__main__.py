"""`python -m compiler` runs the qas command line."""

from .cli import run

run()
