"""Benchmark scripts (run as modules; smoke-tested at tiny sizes, never timed in unit tests)."""
