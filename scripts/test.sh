#!/usr/bin/env bash
# The README's test command: set up, then every test (lit + pytest).
# GPU tests skip (with the reason) on a machine without a Hopper GPU.
#
# lit and pytest run at the same time (neither waits for the other's slow
# tail): pytest prints as it goes, lit's report is printed when both are done.
# The command fails if either fails; both reports and their times are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# pip resolves for ~6 s even when nothing is missing: ask it only when this
# checkout is not the installed tkc or a requirement (pyproject.toml's, with
# the test extra) is not met, as on a fresh machine.
python3 - <<'EOF' 2>/dev/null || python3 -m pip install -q -e ".[test]"
import importlib.metadata as md, importlib.util, pathlib, tomllib
from packaging.requirements import Requirement
spec = importlib.util.find_spec("tkc")
assert spec and pathlib.Path(spec.origin).resolve().parent == pathlib.Path("tkc").resolve()
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for req in map(Requirement, project["dependencies"] + project["optional-dependencies"]["test"]):
    assert md.version(req.name) in req.specifier, req
EOF
# Python may cache bytecode (a machine may say otherwise): each pytest worker
# imports every test module (assertion-rewritten) and tkc; with the caches
# (git-ignored __pycache__) collecting costs 4 s of CPU a process, not 9.
unset PYTHONDONTWRITEBYTECODE

log=$(mktemp -d)
lit_pid=
trap 'if [ -n "$lit_pid" ]; then kill "$lit_pid" 2>/dev/null || true; fi; rm -rf "$log"' EXIT
now() { date +%s.%N; }
start=$(now)

# lit: its own workers (one a core); each RUN line's tkc is a fork of one server
# that imported tkc, MLIR and numpy once (test/lit/tkc_server.py).
( rc=0; lit -sv test/lit >"$log/lit.out" 2>&1 || rc=$?; echo "$rc" >"$log/lit.rc"; now >"$log/lit.end" ) &
lit_pid=$!

# one pytest worker per core (pytest-xdist): the tests are independent processes' work
pytest_rc=0
python3 -m pytest -q -rs -n auto test/python test/gpu || pytest_rc=$?
pytest_end=$(now)

wait "$lit_pid" || true
lit_pid=
lit_rc=$(cat "$log/lit.rc" 2>/dev/null || echo 1)
echo
echo "======================== lit test/lit ========================"
cat "$log/lit.out"
echo
awk -v s="$start" -v l="$(cat "$log/lit.end" 2>/dev/null || now)" -v p="$pytest_end" -v lr="$lit_rc" -v pr="$pytest_rc" \
  'BEGIN { printf "lit: %s in %.0f s; pytest: %s in %.0f s (run side by side)\n",
           lr == 0 ? "passed" : "FAILED", l - s, pr == 0 ? "passed" : "FAILED", p - s }'
[ "$lit_rc" -eq 0 ] && [ "$pytest_rc" -eq 0 ]
