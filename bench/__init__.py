"""GPU calibration benchmark harness for trl-advisor.

Runs a fixed matrix of short TRL training runs (random-weight models built from the catalogue's architectures,
synthetic data made in memory, no network) and records peak GPU memory, step time and the exact configuration
that produced them, one JSON line per configuration. `python -m bench.run --help` says how to run it; README.md
says what every field means.

Only `bench.worker` (the code each configuration runs in) imports torch and the training stack, and it does so
inside functions, so the matrix and the parent's process machinery can be used and tested without them.
"""
