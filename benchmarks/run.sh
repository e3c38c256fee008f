#!/usr/bin/env bash
# Benchmarks of git ckpt side by side with git's own commands (not tests: pytest never
# collects them). Writes benchmarks/results/<name>.{md,json} (+ latest.*) and prints the
# Markdown table.
#
#   benchmarks/run.sh                   # 10,000 files, 15 rounds (~2-3 min on 2 cores)
#   benchmarks/run.sh --quick           # 2,000 files, 5 rounds, fewer event samples
#   benchmarks/run.sh --files 100000    # the 100k-file tree (slow: minutes to generate)
#   benchmarks/run.sh --rounds 30 --profile
#
# BENCH_KEEP=1 keeps the temporary repositories. TMPDIR picks where they are made.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
py="$root/.venv/bin/python"
if [[ ! -x "$py" ]]; then
    echo "benchmarks/run.sh: no $py; create it: python3 -m venv .venv && .venv/bin/pip install -e ." >&2
    exit 2
fi
# The CLI rows run an installed (not editable) copy, as users get it: an editable
# install's import hook adds ~15 ms to every Python start. BENCH_EDITABLE=1 skips
# this (~15 s) and times the CLI of .venv itself.
if [[ -z "${BENCH_EDITABLE:-}" ]]; then
    release="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench-venv-XXXXXX")"
    trap 'rm -rf "$release"' EXIT
    echo "[bench] installing the package into $release (non-editable)" >&2
    python3 -m venv "$release"
    "$release/bin/pip" install -q --disable-pip-version-check "$root" 2>&1 | grep -v '^WARNING' >&2 || true
    [[ -x "$release/bin/git-ckpt" ]] || { echo "benchmarks/run.sh: install failed" >&2; exit 2; }
    export BENCH_CLI_VENV="$release"
fi
"$py" "$here/bench_suite.py" "$@"
