"""Pure statistics for judging the judges: agreement with people, bootstrap intervals, the
effective number of judges, calibration and robust pooling. Stdlib only, no I/O, and nothing
of jury's: every function takes plain sequences of numbers, so that the worker, the analysis
and the results can all use them (the bottom layer, below jury.schemas, which holds
configuration and records only and imports none of it)."""
