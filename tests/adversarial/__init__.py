"""jury's own adversarial corpus (issue 18, part 8): hostile input and hostile providers, each
case with what the user should get, a memory ceiling and a time ceiling.

`cases.py` says what a case is; `input_cases.py` holds the input cases (files and command
lines given to `jury submit`: resources, names, terminal, placeholders), `bound_cases.py`
the sizes, files, encodings and links of issue 30 (bounds), `heuristic_cases.py` regex bombs
and callables (heuristics), `provider_cases.py` the score-reading and hostile-provider cases;
`runner.py` runs one class of cases in a process of its own (each case measured in-process)
and `tests/integration/test_adversarial_corpus.py` checks every case's outcome and ceilings.
"""
