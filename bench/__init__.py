"""Benchmarks: figures to read, not tests to pass. Run them with ``make bench``."""
