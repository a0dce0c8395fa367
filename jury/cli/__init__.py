"""The `jury` command line: every command a thin call of the public API (jury.api).

`jury.cli.main` is the entry point (`jury = "jury.cli.main:main"`); one module per group of
commands: batches (submit, status, results, cancel, resume), browse (list, show, report),
compare, agreement, services (worker, simulate, flower, demo, init), reference (docs/cli.md).
"""
