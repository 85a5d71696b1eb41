"""Benchmark tools, run from a checkout, not installed with the library: the suite (`make bench`,
`python -m benchmarks.benchmark`, one module per section in `sections/`), their shared helpers (`common`) and child
side (`worker`), and the tools beside it (`before_after`, `raptr`, `parallel_gemm`, `targets`)."""
