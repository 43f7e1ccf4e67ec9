"""Back: a checked Spec in; its Facts, the cost estimate, the Plan, rendered files and the files written out."""
