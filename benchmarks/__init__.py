"""langgraph-refine's benchmarks: overhead, concurrency, growth, and real-model quality.

Run them all with `make bench` (or `python -m benchmarks`), one with
`make bench BENCH=overhead`; each run updates `benchmarks/RESULTS.md`.
"""
