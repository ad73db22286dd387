"""A fuzzer of tile programs (docs/fuzz.md)."""
