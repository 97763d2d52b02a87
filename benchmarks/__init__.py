"""Side-by-side benchmarks: `python -m benchmarks` (see docs/RESULTS.md)."""
