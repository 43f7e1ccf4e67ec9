"""qas: compile a declarative YAML search spec into a reviewable AMD Quark AutoSearch script."""

__version__ = "0.1.0"
