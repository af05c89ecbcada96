"""peakbench: open-loop, statistically rigorous benchmarking of file services.

The Rust engine (`peakbench-engine`) generates the load; this package turns
workload files and command-line arguments into the engine's TrialSpec, runs it,
stores every trial, and prints the results.
"""
