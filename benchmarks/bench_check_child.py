"""One CLI `git ckpt check` in a child process, split into parts (run by `bench_check`).

    python bench_check_child.py timers|profile OUT -C REPO check TASK

`timers`: wall time of the imports, of `main()`, and of the engine's steps
(wrapped, so their share is unprofiled); `profile`: the same run under
cProfile, whose stats go to OUT. Both write OUT.json: the exit status, the
times (ms) and every subprocess with its wall time. Python's own start-up
(before this file runs) is measured by the parent (`python -c pass`).

Not a test: pytest never collects these files (`bench_*.py`).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import cProfile  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from typing import Any  # noqa: E402

# labels of the parts (read by bench_check too)
MAIN = "`main()` (click, open, check, output)"
OPEN = "`Checkpointer.open` (discover the repository)"
RUN = "`run_check_now`"
SCRIPT = "this script, first import to exit"
# the engine's steps, in the order `run_check_now` calls them
ENGINE_STEPS = (
    "load_contract",
    "_task_for_check",
    "_baseline",
    "snapshot_and_changes",
    "large_files",
    "contract_globs",
    "evaluate",
    "context_drop_setting",
    "scan_drift",
    "_check_events",
)


def _wrap(owner: Any, name: str, label: str, ms: dict[str, float]) -> None:
    """Replace `owner.name` by a wrapper adding its wall time to `ms[label]`."""
    fn = getattr(owner, name, None)
    if fn is None:  # renamed or gone: time the rest, say so
        print(f"bench_check_child: {owner!r} has no {name}; not timed", file=sys.stderr)
        return

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            ms[label] += (time.perf_counter() - t) * 1000.0

    setattr(owner, name, timed)


def main() -> int:
    mode, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    ms: dict[str, float] = defaultdict(float)
    calls: list[tuple[list[str], float]] = []
    real_run = subprocess.run

    def recording_run(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return real_run(*args, **kwargs)
        finally:
            cmd = args[0] if args else kwargs["args"]
            calls.append(([str(a) for a in cmd], (time.perf_counter() - t) * 1000.0))

    subprocess.run = recording_run
    prof = cProfile.Profile() if mode == "profile" else None
    if prof is not None:
        prof.enable()
    t = time.perf_counter()
    import git_agentckpt.cli.main as cli_main

    ms["import the CLI (`git_agentckpt.cli.main`: click, every command module)"] = (
        time.perf_counter() - t
    ) * 1000.0
    t = time.perf_counter()
    import git_agentckpt.api as api
    import git_agentckpt.contracts.engine as engine
    import git_agentckpt.store.events as events

    ms["import the facade and the engine (pygit2, yaml, contracts, store)"] = (
        time.perf_counter() - t
    ) * 1000.0
    if mode == "timers":
        _wrap(api.Checkpointer, "open", OPEN, ms)
        _wrap(engine, "run_check_now", RUN, ms)
        for step in ENGINE_STEPS:
            _wrap(engine, step, f"· `{step}`", ms)
        _wrap(events.EventLog, "append", "· `EventLog.append` (redact, write the events)", ms)
        _wrap(re, "_compile", "regular expressions compiled or looked up (`re._compile`)", ms)
    sys.argv = ["git-ckpt", *argv]
    t = time.perf_counter()
    code: object = 0
    try:
        cli_main.main()
    except SystemExit as exc:
        code = exc.code
    ms[MAIN] = (time.perf_counter() - t) * 1000.0
    if prof is not None:
        prof.disable()
        prof.dump_stats(out)
    ms[SCRIPT] = (time.perf_counter() - T0) * 1000.0
    with open(out + ".json", "w", encoding="utf-8") as fh:
        json.dump({"exit": code, "ms": ms, "calls": calls}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
