"""Commands: the qas command line and what each command does (compile pipeline, run, init, dashboard)."""
