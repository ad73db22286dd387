"""Benchmarks: tkc kernels next to their peers, measured in the same run."""
