"""The benchmark, run as ``python -m bench`` by bench/run (docs/performance.md)."""
