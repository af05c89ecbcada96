"""SPECsfs-style runs: rc files (rcfile.py) and the load-point curve they describe (run.py)."""
