#!/usr/bin/env bash
# The README's test command: set up, then every test (lit + pytest).
# GPU tests skip (with the reason) on a machine without a Hopper GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[test]"
lit -sv test/lit
# one pytest worker per core (pytest-xdist): the tests are independent processes' work
python3 -m pytest -q -rs -n auto test/python test/gpu
