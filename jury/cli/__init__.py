"""The `jury` command line. Running batches (submit, status, results, cancel, resume) is a
call of the public API (jury.api), which alone reads, queues, follows, cancels and resumes a
batch (tests/unit/cli/test_cli_imports.py); the CLI adds what a terminal shows.

`jury.cli.main` is the entry point (`jury = "jury.cli.main:main"`); one module per group of
commands: batches (submit, status, results, cancel, resume), browse (list, show, report),
compare, agreement, services (worker, simulate, flower, demo, init), reference (docs/cli.md).
"""
