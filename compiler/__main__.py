"""`python -m compiler` runs the qas command line."""

from compiler.commands.cli import run

run()
