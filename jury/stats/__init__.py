"""Pure statistics for judging the judges: agreement with people, bootstrap intervals, the
effective number of judges, calibration and robust pooling. Stdlib only, no I/O, and nothing
of jury's: every function takes plain sequences of numbers, so that schemas, the worker and
the producer can all use them (the bottom layer, below jury.schemas)."""
