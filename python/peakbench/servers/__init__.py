"""Real servers started for tests, demos and benchmarks (on 127.0.0.1 only)."""
