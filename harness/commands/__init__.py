"""One module per `kraftwerk` verb; `harness.cli` is the table of them.

Each module has HELP (the line in `kraftwerk --help`), DESCRIPTION and EPILOG (or None),
`add_arguments(parser)` and `run(args) -> exit code`. A command turns its options into values
(a `harness.core.spec.TestSpec` for the commands that run tests) and passes those down: nothing
below this package reads argparse objects.
"""
