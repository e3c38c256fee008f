"""History-independent reads (issue 12): the same command on a task with a short history
and on one with a long one, side by side in one run.

    .venv/bin/python benchmarks/bench_history.py                 # 20k events, 500 ckpts
    .venv/bin/python benchmarks/bench_history.py --events 2000 --checkpoints 50 --rounds 5
    .venv/bin/python benchmarks/bench_history.py --log-events 100000   # the 100k log row
    .venv/bin/python benchmarks/bench_history.py --log-events 100000 --only-log --keep /tmp/h
        # only the log rows of the 100k log; the repository is kept in /tmp/h and reused

Tasks built (through the API, one event per commit, as `git ckpt event` writes them):
- `small`: 20 tool calls and 2 checkpoints;
- `long`: `--checkpoints` light checkpoints with `--events` tool calls spread between them;
- `tail`: one checkpoint, then `--events` tool calls (the state's worst case).
Rows: task state (in-process, cache warm and cold), `task show`, `tick` (decision only),
resume (all five steps, in-process), `log` and `log -n 10` as a CLI process against
`git log --format=%B` of the same commits, with each child's peak RSS
(`resource.getrusage(RUSAGE_CHILDREN)` read in a wrapper process of its own). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import alternate, cli_env, cli_path, git, median, seal_environment

_PEAK = (
    "import resource,subprocess,sys,time\n"
    "t=time.perf_counter()\n"
    "p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE)\n"
    "ms=(time.perf_counter()-t)*1000\n"
    "if p.returncode: sys.exit(p.stderr.decode(errors='replace'))\n"
    "print(ms, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def child(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """Wall ms and peak RSS (KiB) of one run of `argv` in a process of its own."""
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{argv} failed: {out.stderr}")
    ms, kib = out.stdout.split()
    return float(ms), int(kib)


def build(root: Path, n_events: int, n_ckpts: int, log_events: int) -> Path:
    import git_agentckpt
    from git_agentckpt.model import NewEvent
    from git_agentckpt.store.refs import TaskName

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(200):
        (repo / f"f{i:03d}.txt").write_text(f"file {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    ck = git_agentckpt.open(str(repo))
    steps = [("s1", "read"), ("s2", "change"), ("s3", "run")]

    def calls(task: str, n: int) -> None:
        t = TaskName(task)
        for i in range(n):
            ev = NewEvent("tool.call", input=f"pytest -q tests/test_{i % 50}.py", output="ok")
            ck.log.append(t, [ev])

    ck.task_start("small", "a short task", steps)
    ck.step_start("small", "s1")
    calls("small", 20)
    ck.create("small", message="mid", light=True)
    ck.task_start("long", "a long task", steps)
    ck.step_start("long", "s1")
    per = max(1, n_events // max(1, n_ckpts))
    for _ in range(n_ckpts):
        calls("long", per)
        ck.create("long", message="light", light=True)
    ck.task_start("tail", "all events after the last checkpoint", steps)
    ck.step_start("tail", "s1")
    calls("tail", n_events)
    if log_events:
        calls_fast(repo, "biglog", log_events)
    return repo


def calls_fast(repo: Path, task: str, n: int) -> None:
    """`n` one-event commits written by `git fast-import` (the bytes `EventLog.append`
    writes: canonical JSON under a subject line): a 100k-event log in seconds."""
    from git_agentckpt.model import Event, dumps, new_ulid

    lines: list[bytes] = []
    for i in range(1, n + 1):
        ev = Event(
            new_ulid(),
            i,
            "2026-01-01T00:00:00.000Z",
            task,
            "tool.call",
            input=f"pytest -q tests/test_{i % 50}.py",
            output="ok",
        )
        msg = (ev.summary() + "\n\n" + dumps(ev.to_json()) + "\n").encode()
        lines.append(b"commit refs/agent/events/%s\n" % task.encode())
        lines.append(b"committer B <b@example.com> %d +0000\n" % (1767225600 + i))
        lines.append(b"data %d\n%s\n" % (len(msg), msg))
        if i == 1:
            lines.append(b"deleteall\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(lines), check=True)


def series(rounds: int, fn: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def side_by_side(
    rounds: int,
    a: Callable[[], object],
    b: Callable[[], object],
    after: Callable[[], object] | None = None,
) -> tuple[list[float], list[float]]:
    """`a` and `b` timed in alternating rounds; `after` (untimed) after each call."""
    xs: list[float] = []
    ys: list[float] = []

    def ra() -> None:
        xs.extend(series(1, a))
        if after is not None:
            after()

    def rb() -> None:
        ys.extend(series(1, b))
        if after is not None:
            after()

    for i in range(rounds):
        alternate(i, ra, rb)
    return xs, ys


def row(name: str, small: list[float], big: list[float], target: str = "") -> dict[str, object]:
    ms, mb = median(small), median(big)
    r = {"figure": name, "short_ms": round(ms, 3), "long_ms": round(mb, 3)}
    r["ratio"] = round(mb / ms, 2) if ms > 0 else None
    r["target"] = target
    print(f"{name:44} {ms:9.2f} ms {mb:9.2f} ms  {r['ratio']}x  {target}", flush=True)
    return r


def in_process(repo: Path, rounds: int) -> list[dict[str, object]]:
    import git_agentckpt
    from git_agentckpt.store.refs import TaskName

    def fresh() -> git_agentckpt.api.Checkpointer:
        return git_agentckpt.open(str(repo))

    def state_cold(task: str) -> Callable[[], object]:
        def run() -> object:
            cache = repo / ".git" / "agent" / "state"
            for f in cache.glob("*") if cache.is_dir() else ():
                f.unlink()
            return fresh().state(task)

        return run

    rows = []
    ck = fresh()
    ck.state("tail")  # warm the cache (when there is one)
    ck.state("small")
    rows.append(
        row(
            "task state, 20k events since the tip (warm)",
            *side_by_side(rounds, lambda: fresh().state("small"), lambda: fresh().state("tail")),
            target="<= 2 ms",
        )
    )
    rows.append(
        row(
            "task state, cache removed (cold)",
            *side_by_side(rounds, state_cold("small"), state_cold("tail")),
        )
    )
    rows.append(
        row(
            "task show (state + suspect claims)",
            *side_by_side(
                rounds,
                lambda: (fresh().state("small"), fresh().suspect_claims("small")),
                lambda: (fresh().state("long"), fresh().suspect_claims("long")),
            ),
        )
    )

    def tick(task: str) -> Callable[[], object]:
        from git_agentckpt.tick import derive_signals
        from git_agentckpt.triggers import Signals

        return lambda: derive_signals(fresh(), TaskName(task), Signals(now=time.time()), set())

    rows.append(
        row("tick: derive signals, long", *side_by_side(rounds, tick("small"), tick("long")))
    )
    rows.append(
        row("tick: derive signals, tail", *side_by_side(rounds, tick("small"), tick("tail")))
    )

    def resume(task: str) -> Callable[[], object]:
        return lambda: fresh().resume(task)

    # As a daemon child runs it: the tidying that waits for the answer (cache files,
    # packing the loose objects, `after_reply.py`) runs after the timed call. Packing
    # comes every ~8 resumes of either task (they share the repository's objects), and
    # run inline it landed in whichever task's round it fell: noise, not history.
    from git_agentckpt import after_reply

    after_reply.defer_in_this_process()
    try:
        rows.append(
            row(
                "resume (five steps), 500 ckpts + 20k events",
                *side_by_side(rounds, resume("small"), resume("long"), after_reply.run_queued),
                target="<= 1.2x",
            )
        )
        rows.append(
            row(
                "resume, 20k events since the tip",
                *side_by_side(rounds, resume("small"), resume("tail"), after_reply.run_queued),
            )
        )
    finally:
        after_reply.run_queued()
        after_reply.stop_deferring()
    return rows


def log_rows(repo: Path, work: Path, rounds: int, task: str) -> list[dict[str, object]]:
    env = cli_env(work, server=False)
    exe = cli_path()
    rows = []
    ref = f"refs/agent/events/{task}"
    for label, ours, theirs in (
        (f"log {task}", [exe, "log", task], ["git", "log", "--format=%B", ref]),
        (f"log {task} --json", [exe, "log", task, "--json"], ["git", "log", "--format=%B", ref]),
        (
            f"log -n 10 {task}",
            [exe, "log", "-n", "10", task],
            ["git", "log", "-n", "10", "--format=%B", ref],
        ),
    ):
        a: list[tuple[float, int]] = []
        b: list[tuple[float, int]] = []
        for i in range(rounds):
            alternate(
                i,
                lambda: a.append(child(ours, env, repo)),  # noqa: B023
                lambda: b.append(child(theirs, env, repo)),  # noqa: B023
            )
        ma, mb = median([x for x, _ in a]), median([x for x, _ in b])
        ra, rb = max(k for _, k in a), max(k for _, k in b)
        r = {
            "figure": label,
            "ours_ms": round(ma, 1),
            "git_ms": round(mb, 1),
            "ratio": round(ma / mb, 2),
            "ours_peak_rss_mib": round(ra / 1024, 1),
            "git_peak_rss_mib": round(rb / 1024, 1),
            "target": "<= 2x, memory flat",
        }
        print(
            f"{label:44} {ma:9.1f} ms vs git {mb:8.1f} ms  {ma / mb:5.2f}x   "
            f"peak RSS {ra / 1024:.1f} MiB vs {rb / 1024:.1f} MiB",
            flush=True,
        )
        rows.append(r)
    return rows


def small_repo(root: Path) -> Path:
    """A repository with one short task: `list` and `log -n 10` as a user first runs them."""
    import git_agentckpt

    repo = root / "small-repo"
    shutil.rmtree(repo, ignore_errors=True)  # a kept directory's, from an earlier run
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    ck = git_agentckpt.open(str(repo))
    ck.task_start("small", "a short task", [("s1", "one")])
    for i in range(20):
        ck.event("small", "tool.call", {"input": f"pytest {i}"})
    ck.create("small", message="mid")
    return repo


def cold_rows(repo: Path, work: Path, rounds: int) -> list[dict[str, object]]:
    env = cli_env(work, server=False)
    exe = cli_path()
    child([exe, "--version"], env, repo)  # bytecode compiled once
    rows = []
    base = [child(["git", "--version"], env, repo)[0] for _ in range(rounds)]
    for argv in (["--version"], ["list"], ["log", "-n", "10", "small"], ["task", "list"]):
        xs, gs = [], []
        for i in range(rounds):
            alternate(
                i,
                lambda: xs.append(child([exe, *argv], env, repo)[0]),  # noqa: B023
                lambda: gs.append(child(["git", "--version"], env, repo)[0]),  # noqa: B023
            )
        m, g = median(xs), median(gs + base)
        print(
            f"cold git ckpt {' '.join(argv):30} {m:7.1f} ms  git --version {g:5.1f} ms  "
            f"(+{m - g:.0f} ms)",
            flush=True,
        )
        rows.append(
            {
                "figure": "cold " + " ".join(argv),
                "ours_ms": round(m, 1),
                "git_version_ms": round(g, 1),
                "over_ms": round(m - g, 1),
                "target": "<= git --version + 150 ms",
            }
        )
    return rows


def build_log_only(root: Path, log_events: int) -> Path:
    """A repository holding only the `biglog` task's log (`--only-log`)."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    calls_fast(repo, "biglog", log_events)
    return repo


def run(work: Path, args: argparse.Namespace) -> list[dict[str, object]]:
    seal_environment(work)
    os.environ["GIT_CKPT_SERVER"] = "off"
    t0 = time.perf_counter()
    repo = work / "repo"
    if repo.is_dir():
        print(f"[bench] reusing {repo} (built by an earlier --keep run)", flush=True)
    elif args.only_log:
        repo = build_log_only(work, args.log_events)
    else:
        repo = build(work, args.events, args.checkpoints, args.log_events)
    what = f"{args.events} events, {args.checkpoints} checkpoints"
    if args.only_log:
        what = f"a log of {args.log_events} events"
    print(
        f"[bench] ready: {what} in {time.perf_counter() - t0:.0f} s; "
        f"python {sys.version.split()[0]}, cli {cli_path()}",
        flush=True,
    )
    if args.only_log:
        return log_rows(repo, work, args.rounds, "biglog")
    rows = in_process(repo, args.rounds)
    rows += log_rows(repo, work, args.rounds, "long")
    if args.log_events:
        rows += log_rows(repo, work, max(3, args.rounds // 2), "biglog")
    return rows + cold_rows(small_repo(work), work, args.rounds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--checkpoints", type=int, default=500)
    p.add_argument("--log-events", type=int, default=0, help="also a log of N events")
    p.add_argument("--only-log", action="store_true", help="only the --log-events log rows")
    p.add_argument("--keep", type=Path, help="build in this directory, keep it, reuse it")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args()
    if args.only_log and not args.log_events:
        p.error("--only-log needs --log-events N")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        rows = run(args.keep.resolve(), args)
    else:
        with tempfile.TemporaryDirectory(prefix="ckpt-bench-history-") as tmp:
            rows = run(Path(tmp), args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
