"""`git ckpt` costs measured side by side with git's own commands, in the same run.

Run through `benchmarks/run.sh` (`--help` for the options). Every measurement
works in a generated repository in a temporary directory, under a sealed
environment (temporary HOME and XDG dirs, GIT_CONFIG_NOSYSTEM, no inherited
GIT_* variables). One warm-up round, then medians of wall time
(`time.perf_counter`); ratios are ours / git. CPU time (this process and its
children) is reported too: it moves less than wall time when other work loads
the machine.

1. full checkpoint: N committed files; each round modifies 20 files and adds 2
   untracked ones, then runs (a) `ck.create` in-process and (b) git's own
   `add -A` on a persistent private index + `write-tree` + `commit-tree` +
   `update-ref`, alternating which runs first (both see the same changes).
   (c) the CLI `git-ckpt -C repo create` as a subprocess, in rounds of its own
   (it shares our private index with (a)), and the parts of its start-up.
   (d) the same right after the user staged a file: our private index is copied
   again; git's side copies the user's index afresh (`bench_reseed.py`).
2. unchanged tree: full checkpoints (ours and git's) and light ones.
3. event log: single appends, a batch of 1000 in one call, reading a log of
   10k events (100 commits of 100).
4. `git ckpt check` with 10 built-in constraints (in-process and the CLI) and
   workspace verification, each against `git status --porcelain` in the same
   rounds (`bench_check.py`).
5. machine facts. With `--profile`, or when (a)/(b) is over the 1.10 budget,
   a cProfile of `ck.create` (alternating with git) says where the time goes;
   with `--profile`, or when the CLI `check` takes 200 ms or more, a breakdown
   and cProfile of the CLI `check` (`bench_profile.py`, `bench_check.py`).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_check import CHECK_BUDGET_MS, bench_check, check_rows, profile_cli_check
from bench_lib import (
    GitCheckpoint,
    GitEventAppend,
    Mutator,
    Row,
    Series,
    alternate,
    bench_event,
    cli_env,
    cli_path,
    cli_python,
    cpu_model,
    git,
    git_event_body,
    make_repo,
    markdown,
    median,
    p95,
    paired,
    run_cli,
    run_cmd,
    seal_environment,
    start_server,
    stop_servers,
    timed,
)
from bench_profile import profile_create
from bench_reseed import bench_reseed, reseed_row

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer

FULL_BUDGET = 1.10
CLI_OVERHEAD_BUDGET_MS = 150.0
APPEND_BUDGET_MS = 1.0
LIGHT_BUDGET_MS = 5.0


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@dataclass
class Params:
    files: int
    rounds: int
    appends: int
    batch: int
    read_events: int
    read_batch: int
    read_rounds: int
    git_append_rounds: int
    profile_rounds: int
    force_profile: bool
    quick: bool


# -- machine facts ----------------------------------------------------------------------


def machine_facts(work: Path, p: Params) -> dict[str, Any]:
    import pygit2  # noqa: TID251  (only to report the libgit2 version)

    return {
        "date (UTC)": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "nproc": run_cmd("nproc") or str(os.cpu_count()),
        "cpu": cpu_model(),
        "os": platform.platform(),
        "git": run_cmd("git", "--version").removeprefix("git version "),
        "python": platform.python_version(),
        "pygit2": metadata.version("pygit2"),
        "libgit2": pygit2.LIBGIT2_VERSION,
        "git-agentckpt": metadata.version("git-agentckpt"),
        "temp dir file system": run_cmd("stat", "-f", "-c", "%T", str(work)),
        "CLI under test": cli_path()
        + (" (non-editable install)" if os.environ.get("BENCH_CLI_VENV") else " (.venv)"),
        "files in tree": p.files,
        "rounds": p.rounds,
        "mode": "quick" if p.quick else "default",
        "load average (start)": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


# -- 1. full checkpoint vs git, and the CLI -----------------------------------------------


@dataclass
class FullResult:
    ours: Series
    git: Series
    git_steps: dict[str, list[float]]


def bench_full(ck: Checkpointer, gck: GitCheckpoint, mut: Mutator, rounds: int) -> FullResult:
    mut.step()  # warm-up: seeds our private index, warms the page cache and the imports
    ck.create(task="bench", message="warm-up", light=False)
    gck.run()
    ours, theirs = Series(), Series()
    steps: dict[str, list[float]] = defaultdict(list)
    for i in range(rounds):
        mut.step()  # modify, then run both: both see the same changes
        a = functools.partial(ck.create, task="bench", message=f"r{i}", light=False)
        alternate(i, functools.partial(ours.add, a), functools.partial(theirs.add, gck.run))
        for k, v in gck.last_steps.items():
            steps[k].append(v)
    return FullResult(ours, theirs, dict(steps))


# Where the CLI's start-up goes: each step imports a little more (`python -c ...`).
IMPORT_STEPS = {
    "python start-up (`python -c pass`)": "pass",
    "+ import the CLI (`git_agentckpt.cli.main`, click)": "import git_agentckpt.cli.main",
    "+ import the facade (`git_agentckpt.api`, pygit2)": (
        "import git_agentckpt.cli.main, git_agentckpt.api"
    ),
}


@dataclass
class CliResult:
    create: Series  # each call in its own process (GIT_CKPT_DAEMON=off)
    create_warm: Series  # handed to the work tree's daemon
    startup: Series
    git_startup: Series
    imports: dict[str, Series]


def bench_cli(repo: Path, work: Path, mut: Mutator, rounds: int) -> CliResult:
    """(c) `git-ckpt -C repo create -t bench2`; then start-up alone vs `git --version`,
    and the cost of the imports."""
    exe, env, warm_env = cli_path(), cli_env(work, server=False), cli_env(work)
    argv = [exe, "-C", str(repo), "create", "-t", "bench2", "-m", "cli"]
    create = functools.partial(run_cli, argv, env)
    create_warm = functools.partial(run_cli, argv, warm_env)
    mut.step()
    create()  # warm-up: starts task bench2, writes the bytecode cache
    start_server(warm_env, repo)
    mut.step()
    create_warm()
    res = CliResult(Series(), Series(), Series(), Series(), {k: Series() for k in IMPORT_STEPS})
    for i in range(rounds):  # the same changes before each, alternating which runs
        mut.step()
        if i % 2:
            res.create.add(create)
        else:
            res.create_warm.add(create_warm)
    for i in range(rounds):
        mut.step()
        if i % 2:
            res.create_warm.add(create_warm)
        else:
            res.create.add(create)
    version = functools.partial(run_cli, [exe, "--version"], env)
    gitv = functools.partial(run_cli, ["git", "--version"], env)
    version()
    gitv()
    for i in range(rounds):
        alternate(
            i,
            functools.partial(res.startup.add, version),
            functools.partial(res.git_startup.add, gitv),
        )
    for label, code in IMPORT_STEPS.items():
        run = functools.partial(run_cli, [cli_python(), "-c", code], env)
        run()
        for _ in range(rounds):
            res.imports[label].add(run)
    return res


# -- 2. unchanged tree --------------------------------------------------------------------


@dataclass
class UnchangedResult:
    full: Series
    git: Series
    light: Series


def bench_unchanged(ck: Checkpointer, gck: GitCheckpoint, rounds: int) -> UnchangedResult:
    # warm-up: both absorb whatever changed since their last run
    ck.create(task="bench", message="unchanged warm-up", light=False)
    gck.run()
    ck.create(task="bench", message="light warm-up", light=True)
    res = UnchangedResult(Series(), Series(), Series())
    for i in range(rounds):
        a = functools.partial(ck.create, task="bench", message=f"same {i}", light=False)
        alternate(i, functools.partial(res.full.add, a), functools.partial(res.git.add, gck.run))
        res.light.add(functools.partial(ck.create, task="bench", message=f"l{i}", light=True))
    return res


# -- 3. event log -------------------------------------------------------------------------


@dataclass
class EventResult:
    single: Series
    git_single: Series
    batch: Series
    git_batch: Series
    read: Series
    git_read: Series


def bench_events(ck: Checkpointer, repo: Path, p: Params) -> EventResult:
    res = EventResult(Series(), Series(), Series(), Series(), Series(), Series())
    for i in range(20):  # warm-up on another task
        ck.append_events("ev-warm", [bench_event(i)])
    for i in range(p.appends):
        res.single.add(functools.partial(ck.append_events, "ev-single", [bench_event(i)]))
    log(f"  {p.appends} single appends done")

    gev = GitEventAppend(repo)
    one = git_event_body(1)
    gev.run(one)
    for _ in range(p.git_append_rounds):
        res.git_single.add(functools.partial(gev.run, one))

    events = [bench_event(i) for i in range(p.batch)]
    big = git_event_body(p.batch)
    ck.append_events("ev-batch", events)  # warm-up
    gev.run(big)
    for i in range(p.read_rounds):
        alternate(
            i,
            functools.partial(
                res.batch.add, functools.partial(ck.append_events, "ev-batch", events)
            ),
            functools.partial(res.git_batch.add, functools.partial(gev.run, big)),
        )
    log(f"  batches of {p.batch} done")

    chunk = [bench_event(i) for i in range(p.read_batch)]
    for _ in range(p.read_events // p.read_batch):
        ck.append_events("ev-read", chunk)
    n = len(ck.events("ev-read"))  # warm-up, and a check that they are all there
    if n != p.read_events:
        raise RuntimeError(f"read {n} events, expected {p.read_events}")
    git_log = functools.partial(git, repo, "log", "--format=%B", "refs/agent/events/ev-read")
    git_log()
    for i in range(p.read_rounds):
        alternate(
            i,
            functools.partial(res.read.add, functools.partial(ck.events, "ev-read")),
            functools.partial(res.git_read.add, git_log),
        )
    log(f"  reads of {p.read_events} events done")
    return res


# -- the run ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> Params:
    ap = argparse.ArgumentParser(prog="benchmarks/run.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (2k files, 5 rounds)")
    ap.add_argument("--files", type=int, default=None, help="files in the tree (default 10000)")
    ap.add_argument("--rounds", type=int, default=None, help="measured rounds (default 15)")
    ap.add_argument(
        "--profile", action="store_true", help="always profile ck.create and the CLI check"
    )
    a = ap.parse_args(argv)
    quick = bool(a.quick)
    files = a.files if a.files is not None else (2000 if quick else 10000)
    rounds = a.rounds if a.rounds is not None else (5 if quick else 15)
    if files < 1000 or rounds < 1:
        ap.error("--files must be at least 1000 and --rounds at least 1")
    return Params(
        files=files,
        rounds=rounds,
        appends=200 if quick else 1000,
        batch=1000,
        read_events=10000,
        read_batch=100,
        read_rounds=3 if quick else 7,
        git_append_rounds=30 if quick else 100,
        profile_rounds=3 if quick else 5,
        force_profile=bool(a.profile),
        quick=quick,
    )


def build_rows(
    p: Params, full: FullResult, cli: CliResult, un: UnchangedResult, ev: EventResult
) -> list[Row]:
    n = f"{p.files:,} files"
    a, b = full.ours.med, full.git.med
    steps = ", ".join(f"{k} {median(v):.1f}" for k, v in full.git_steps.items())
    rows = [
        Row.of(
            f"full checkpoint, {n}, 20 modified + 2 new (in-process `ck.create`)",
            full.ours,
            full.git,
            budget=f"≤ {FULL_BUDGET:.2f}×",
            ok=a / b <= FULL_BUDGET,
            note="git = `add -A` on a persistent private index + `write-tree` + "
            f"`commit-tree` + `update-ref` (4 subprocesses); its steps (median ms): {steps}. "
            f"Per-round (paired) ratios: {paired(full.ours.wall, full.git.wall)}",
        ),
        Row.of(
            f"full checkpoint, {n}, via the CLI handed to the warm server "
            "(`git-ckpt -C repo create`, subprocess; the default)",
            cli.create_warm,
            full.git,
            note="rounds of its own (the same changes per round; it shares our private "
            "index); the git column is the in-process row's. Bytecode cached, as when installed",
        ),
        Row.of(
            f"full checkpoint, {n}, via the CLI in its own process (GIT_CKPT_SERVER=off)",
            cli.create,
            full.git,
            note="rounds interleaved with the row above",
        ),
    ]
    for label, series in (("warm server", cli.create_warm), ("own process", cli.create)):
        c = series.med
        rows.append(
            Row(
                f"CLI overhead ({label}): CLI create − in-process create",
                c - a,
                budget=f"≤ {CLI_OVERHEAD_BUDGET_MS:.0f} ms",
                ok=c - a <= CLI_OVERHEAD_BUDGET_MS,
            )
        )
    rows.append(
        Row.of(
            "launcher start-up alone (`git-ckpt --version`: Python, pip's script, `cli/launch.py`; "
            "no click) vs `git --version`",
            cli.startup,
            cli.git_startup,
        )
    )
    for label, series in cli.imports.items():
        rows.append(Row.of(f"CLI start-up parts: {label}", series))
    rows.append(
        Row.of(
            f"unchanged tree, full checkpoint, {n} (in-process)",
            un.full,
            un.git,
            budget=f"≤ {FULL_BUDGET:.2f}×",
            ok=un.full.med / un.git.med <= FULL_BUDGET,
        )
    )
    rows.append(
        Row.of(
            "unchanged tree, light checkpoint (in-process)",
            un.light,
            budget=f"a few ms (≤ {LIGHT_BUDGET_MS:.0f})",
            ok=un.light.med <= LIGHT_BUDGET_MS,
        )
    )
    s = ev.single.med
    rows.append(
        Row.of(
            f"event append, single, median of {len(ev.single.wall)} (in-process)",
            ev.single,
            ev.git_single,
            budget=f"≤ {APPEND_BUDGET_MS:.0f} ms",
            ok=s <= APPEND_BUDGET_MS,
            note="git = `commit-tree` (body on stdin) + `update-ref` (2 subprocesses, "
            f"{len(ev.git_single.wall)} samples)",
        )
    )
    rows.append(
        Row(
            "event append, single, p95",
            p95(ev.single.wall),
            p95(ev.git_single.wall),
            p95(ev.single.cpu),
            p95(ev.git_single.cpu),
        )
    )
    bt = ev.batch.med
    rows.append(
        Row.of(
            f"event append, batch of {p.batch} in one call (total)",
            ev.batch,
            ev.git_batch,
            budget="per event ≤ 1/5 of a single",
            ok=bt / p.batch <= 0.2 * s,
            note=f"{1000 * bt / p.batch:.0f} µs per event, {s * p.batch / bt:.1f}× cheaper than "
            "a single append; git = one commit of the same size. The budget is our reading of "
            "'batches far faster'",
        )
    )
    rows.append(
        Row.of(
            f"read all {p.read_events:,} events ({p.read_events // p.read_batch} commits "
            f"of {p.read_batch}), `ck.events`",
            ev.read,
            ev.git_read,
            note="git = `git log --format=%B` on the log ref (no JSON parsing)",
        )
    )
    return rows


def main(argv: Sequence[str]) -> int:
    p = parse_args(argv)
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-"))
    try:
        seal_environment(work)
        import git_agentckpt  # after sealing: libgit2 reads its config paths at start-up

        facts = machine_facts(work, p)
        log(f"generating a repository of {p.files:,} files in {work}")
        t_setup = timed(lambda: make_repo(work, p.files))
        repo = work / f"repo-{p.files}"
        facts["repo setup (s)"] = f"{t_setup / 1000:.1f}"
        ck = git_agentckpt.open(str(repo))
        gck = GitCheckpoint(repo)
        mut = Mutator(repo, p.files)

        log(f"1. full checkpoint vs git: {p.rounds} rounds")
        full = bench_full(ck, gck, mut, p.rounds)
        log(f"   ours {full.ours.med:.1f} ms, git {full.git.med:.1f} ms")
        log(f"1c. CLI: {p.rounds} rounds")
        cli = bench_cli(repo, work, mut, p.rounds)
        log(f"1d. full checkpoint after the user's index changed: {p.rounds} rounds")
        reseed = bench_reseed(ck, repo, mut, p.rounds)
        log("2. unchanged tree")
        unchanged = bench_unchanged(ck, gck, p.rounds)
        log("3. event log")
        ev = bench_events(ck, repo, p)
        log(f"4. check and workspace verification vs git status: {p.rounds} rounds each")
        chk = bench_check(ck, repo, mut, p.rounds, cli_env(work))

        rows = build_rows(p, full, cli, unchanged, ev) + check_rows(p.files, chk)
        rows.insert(3, reseed_row(p.files, *reseed))
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        name = f"bench-{stamp}-{p.files}files" + ("-quick" if p.quick else "")

        profile: dict[str, Any] | None = None
        section = ""
        ratio = rows[0].ratio or 0.0
        if p.force_profile or ratio > FULL_BUDGET:
            log(f"profiling ck.create ({p.profile_rounds} rounds; full ratio {ratio:.2f})")
            section, profile = profile_create(
                ck, gck, mut, p.profile_rounds, results / f"{name}.profile.txt"
            )
        check_section, check_profile = "", None
        if p.force_profile or chk.cli.med >= CHECK_BUDGET_MS:
            log(f"profiling the CLI check ({p.profile_rounds} runs; {chk.cli.med:.0f} ms)")
            check_section, check_profile = profile_cli_check(
                repo,
                mut,
                (p.rounds, p.profile_rounds),
                cli_env(work),
                chk,
                results / f"{name}.check-profile",
            )
        facts["load average (end)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        md = markdown(f"git ckpt benchmarks ({name})", facts, rows) + section + check_section
        doc = {
            "name": name,
            "facts": facts,
            "params": p.__dict__,
            "rows": [r.to_json() for r in rows],
            "profile": profile,
            "check_profile": check_profile,
        }
        (results / f"{name}.md").write_text(md)
        (results / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        shutil.copyfile(results / f"{name}.md", results / "latest.md")
        shutil.copyfile(results / f"{name}.json", results / "latest.json")
        print(md)
        log(f"written {results / name}.md and .json")
        return 0
    finally:
        stop_servers(cli_env(work), work)
        if os.environ.get("BENCH_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
