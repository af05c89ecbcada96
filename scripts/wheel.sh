#!/usr/bin/env bash
# Builds what users install without a Rust toolchain, into dist/: a manylinux2014 wheel
# (glibc 2.17 and newer; zig links it against that baseline) with a stripped engine, and the sdist.
# Then installs the wheel into a fresh virtual environment with no cargo on PATH and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/build"
"$tools/build/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" ziglang
# maturin finds zig through `python3 -m ziglang`: the build environment's python comes first.
export PATH="$tools/build/bin:$HOME/.cargo/bin:$PATH"
"$tools/build/bin/maturin" build --release --strip --zig --compatibility manylinux2014 --out dist
"$tools/build/bin/maturin" sdist --out dist
wheel=$(ls -t dist/peakbench-*manylinux*.whl | head -n 1)
python3 -m venv "$tools/user"
"$tools/user/bin/pip" install -q --disable-pip-version-check "$wheel"
# The user's environment: no Rust anywhere on PATH.
env PATH="$tools/user/bin:/usr/sbin:/usr/bin:/sbin:/bin" peakbench --version
env PATH="$tools/user/bin:/usr/sbin:/usr/bin:/sbin:/bin" peakbench search mail --target 'sim://?capacity=400' \
  --db "$tools/check.db" --json "$tools/search.json" >/dev/null
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1)); installed without Rust and ran a search"
