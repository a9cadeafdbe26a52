"""Benchmarks run by ``make bench`` / ``tuplemesh bench``; each runs its baselines in the same run."""
