#!/bin/sh
# The interruption benchmark with its plot: installs the `bench` extra (matplotlib) into
# the project's venv, then runs it. Arguments go to bench_interruptions.py (--seeds N, ...).
set -e
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[bench]'
exec .venv/bin/python benchmarks/interruptions/bench_interruptions.py "$@"
