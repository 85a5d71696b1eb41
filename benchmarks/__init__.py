"""Benchmark tools (`make bench`, `python -m benchmarks.raptr`): run from a checkout, not installed with the library."""
