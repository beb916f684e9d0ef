"""Vectide's benchmark suite: ``python -m benchmarks.run`` (``make bench``)."""
