"""Benchmarks (`make bench`): each writes its numbers to bench/results/<name>.json."""
