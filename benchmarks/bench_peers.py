"""`git ckpt` against its nearest peer on PyPI, `stepback`, and git's own plumbing.

    .venv/bin/python benchmarks/bench_peers.py --files 10000 --rounds 7

One generated repository (`make_repo`, its objects then packed as a clone's
are), a sealed environment, every side in the same run, interleaved (the order
rotates each round), one warm-up round, medians.

Checkpoint, 10 modified + 5 added files (`Mutator`) before each sub-round. A
sub-round runs one of our ways, git's and one of stepback's ways, all after the
same changes; our four ways take turns (each once a round), stepback's two too:
- ours, in-process: `Checkpointer.create(light=False)` (full scan: `add -A` on
  our private index, `write-tree`, the commit, the ref);
- ours, in-process with the watcher: the same with a `TreeWatcher` active, as in
  a daemon child (the changed paths only); an untimed checkpoint right before
  re-stamps the private index the other ways wrote (the daemon is its only
  writer); the warm server of today does not watch;
- ours, CLI: `git-ckpt -C repo create` as a subprocess, handed to the warm
  server (the default; the work tree's daemon, which watches it, once issue 12
  is in), re-stamped by an untimed call first, and in its own process
  (`GIT_CKPT_SERVER=off`); the CLI of `.venv` unless BENCH_CLI_VENV names one;
- git: `add -A` on a persistent private index + `write-tree` + `commit-tree` +
  `update-ref` (`bench_lib.GitCheckpoint`, 4 subprocesses);
- stepback 0.2.0, in-process: `Engine.checkpoint()` in a long-lived driver run
  by stepback's own venv (what its watcher calls on each settled edit burst:
  `add -A` into a fresh temporary index, so git reads and hashes every file,
  `write-tree`, `commit-tree`, `update-ref`, a `diff --name-status`, its state
  file written with fsync);
- stepback, CLI: `stepback run -- true`, its only command that checkpoints (a
  session-start checkpoint, a watchdog watcher started and stopped, a
  session-end snapshot that finds nothing new).

Restore, 10 files away: each round, one more checkpoint on every side (the same
tree T); then for each side in turn, 8 tracked files are modified and 2 new
files added, the side brings the tree back to T (timed), and the script checks
that it did (contents back, new files gone):
- ours: `Checkpointer.restore(id)` in-process (with and without the watcher),
  and `git-ckpt -C repo restore ID` (warm server, own process); the tree is no
  checkpoint's, so ours takes a light + full safety checkpoint first;
- git: `add -A` + `read-tree -m -u T` on its private index (without the `add`,
  read-tree sees no change: the index already holds T); no safety copy;
- stepback: `Engine.rewind(cp)` in the driver (a snapshot committed with a
  redo ref, a journal, another snapshot, `ls-tree` x2, `diff`, `read-tree`,
  `checkout-index` into a staging dir, renames, a verifying snapshot: three
  full snapshots as above), and the CLI `stepback rewind ID -y` (a preview
  snapshot and `diff --stat` first).

stepback is installed by this script into a temporary venv (`pip install
stepback==0.2.0`); it is never a dependency of the project. `--stepback-venv
DIR` reuses one. Results: `benchmarks/results/peers-<files>.{md,json}`.
CPU = the process and its waited-for children (user + system); for the warm
server only the client's is seen, so it is not shown.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_lib import (
    GitCheckpoint,
    Mutator,
    Series,
    cli_env,
    cli_path,
    cpu_model,
    file_path,
    git,
    make_repo,
    median,
    paired,
    run_cli,
    run_cmd,
    seal_environment,
)

STEPBACK = "stepback==0.2.0"
TASK = "peers"

# Run by stepback's venv: one Engine, one command a line on stdin, a JSON line back
# with the wall and CPU time (this process + the git it waited for) of the call.
DRIVER = """
import json, resource, sys, time
from pathlib import Path
from stepback.engine import Engine
from stepback.store import State

eng = Engine(Path(sys.argv[1]))

def cpu():
    k = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + k.ru_utime + k.ru_stime

for line in sys.stdin:
    cmd, *arg = line.split()
    out = {}
    if cmd == "rewind":
        eng.state = State.load(eng.state_path)  # the CLI may have written it
        target = eng.state.by_id(int(arg[0]))
    c0, t0 = cpu(), time.perf_counter()
    if cmd == "checkpoint":
        cp = eng.checkpoint()
        out = {"id": cp.id if cp else None}
    elif cmd == "rewind":
        eng.rewind(target)
    out.update(wall=(time.perf_counter() - t0) * 1000, cpu=(cpu() - c0) * 1000)
    print(json.dumps(out), flush=True)
"""


def log(msg: str) -> None:
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


def measure(fn: Callable[[], object]) -> tuple[float, float]:
    s = Series()
    s.add(fn)
    return s.wall[0], s.cpu[0]


# -- stepback ------------------------------------------------------------------------------


def install_stepback(venv: Path, env: dict[str, str]) -> Path:
    if not (venv / "bin" / "stepback").exists():
        log(f"installing {STEPBACK} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
        subprocess.run([f"{venv}/bin/pip", "install", "-q", STEPBACK], check=True, env=env)
    return venv


class Driver:
    """stepback's `Engine` in its own long-lived process (its venv's python)."""

    def __init__(self, venv: Path, repo: Path, work: Path) -> None:
        script = work / "stepback_driver.py"
        script.write_text(DRIVER)
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "python"), str(script), str(repo)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the stepback driver died on {line!r}")
        out: dict[str, Any] = json.loads(reply)
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


# -- the sides -----------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    run: Callable[[], tuple[float, float]]
    prepare: Callable[[], None] | None = None
    cpu_seen: bool = True
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    git_wall: list[float] = field(default_factory=list)  # git's, same (sub-)round

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.git_wall.clear()

    def measure(self) -> float:
        wall, cpu = self.run()
        self.wall.append(wall)
        self.cpu.append(cpu)
        return wall


@dataclass
class Away:
    """Takes the tree 10 files away from T: 8 tracked files modified, 2 files added."""

    repo: Path
    n_files: int
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    count: int = 0
    saved: dict[Path, bytes] = field(default_factory=dict)
    added: list[Path] = field(default_factory=list)

    def step(self) -> None:
        self.count += 1
        paths = [self.repo / file_path(i) for i in self.rng.sample(range(self.n_files), 8)]
        self.saved = {p: p.read_bytes() for p in paths}
        for p in paths:
            with open(p, "a", encoding="utf-8") as fh:
                fh.write(f"away {self.count}\n")
        d = self.rng.randrange(100)
        self.added = [self.repo / f"d{d:02d}/s{k}/away-{self.count:04d}.txt" for k in range(2)]
        for p in self.added:
            p.write_text(f"away {self.count}\n")

    def check(self, side: str) -> None:
        if any(p.read_bytes() != b for p, b in self.saved.items()) or any(
            p.exists() for p in self.added
        ):
            raise RuntimeError(f"{side}: the tree is not back to the checkpoint")


class Peers:
    """Everything the rounds need: the repository, our facade, git's and stepback's."""

    def __init__(self, repo: Path, work: Path, sb_venv: Path, n_files: int) -> None:
        from git_agentckpt.api import Checkpointer
        from git_agentckpt.daemon import watcher
        from git_agentckpt.daemon.barrier import InProcess
        from git_agentckpt.git import watch_view

        self.repo, self.wmod, self.agent_dir = repo, watch_view, str(repo / ".git" / "agent")
        self.ck = Checkpointer.open(str(repo))
        self.ck.task_start(TASK, goal="peer benchmark")
        self.gck = GitCheckpoint(repo, ref="refs/bench/peers")
        self.mut = Mutator(repo, n_files, n_modify=10, n_new=5)
        self.away = Away(repo, n_files)
        self.live = watcher.TreeWatcher(str(repo), self.agent_dir)
        self.live.start()
        self.live.finish_walk()
        self.source = InProcess(self.live)
        self.driver = Driver(sb_venv, repo, work)
        self.sb = str(sb_venv / "bin" / "stepback")
        self.exe, self.warm_env = cli_path(), cli_env(work)
        self.own_env = cli_env(work, server=False)
        # this round's checkpoint of tree T on each side, for the restores
        self.target, self.target_tree, self.target_sb = "", "", 0
        self.count = 0
        self.full_scans = {"in-process watcher": 0, "CLI, warm": 0}  # in timed calls
        run_cli([self.exe, "-C", str(repo), "server", "start"], self.warm_env)

    def close(self) -> None:
        self.driver.close()
        self.live.close()
        argv = [self.exe, "-C", str(self.repo), "server", "stop"]  # `daemon` since issue 12
        subprocess.run(argv, env=self.warm_env, capture_output=True, check=False)

    def create(self) -> str:
        self.count += 1
        return self.ck.create(task=TASK, message=f"peers {self.count}", light=False).id

    def watched(self, fn: Callable[[], object]) -> tuple[float, float]:
        """`fn` timed with the watcher active."""
        self.wmod.activate(self.source)
        try:
            return self.counted("in-process watcher", fn)
        finally:
            self.wmod.activate(None)

    def counted(self, key: str, fn: Callable[[], object]) -> tuple[float, float]:
        """`fn` timed; the full scans the watch log names meanwhile are counted."""
        before = self.scans()
        try:
            return measure(fn)
        finally:
            self.full_scans[key] += self.scans() - before

    def restamp(self) -> None:
        """An untimed checkpoint with the watcher: the daemon is the private index's only
        writer, here the other ways wrote it too (its stamp is stale: a full scan)."""
        self.wmod.activate(self.source)
        try:
            self.create()
        finally:
            self.wmod.activate(None)

    def scans(self) -> int:
        return sum("full scan" in line for line in self.wmod.read_log(self.agent_dir, 10**6))

    def warm(self, *args: str) -> tuple[float, float]:
        argv = [self.exe, "-C", str(self.repo), *args]
        return self.counted("CLI, warm", lambda: run_cli(argv, self.warm_env))

    def rewarm(self) -> None:
        """The same untimed re-stamp for a daemon that watches the work tree."""
        argv = [self.exe, "-C", str(self.repo), "create", "-t", TASK, "-m", "re-stamp"]
        run_cli(argv, self.warm_env)

    def own(self, *args: str) -> tuple[float, float]:
        return measure(lambda: run_cli([self.exe, "-C", str(self.repo), *args], self.own_env))

    def git_restore(self) -> None:
        git(self.repo, "add", "-A", env=self.gck.env)
        git(self.repo, "read-tree", "-m", "-u", self.target_tree, env=self.gck.env)

    def sb_cli(self, *args: str) -> tuple[float, float]:
        argv = [self.sb, *args]
        return measure(lambda: subprocess.run(argv, cwd=self.repo, capture_output=True, check=True))

    def sb_call(self, *words: object) -> tuple[float, float]:
        out = self.driver.call(" ".join(map(str, words)))
        return float(out["wall"]), float(out["cpu"])

    def checkpoint_sides(self) -> tuple[list[Side], Side, list[Side]]:
        mk = ("create", "-t", TASK, "-m", "peers")
        ours = [
            Side("ours, in-process `Checkpointer.create`", lambda: measure(self.create)),
            Side("ours, in-process + watcher", lambda: self.watched(self.create), self.restamp),
            Side(
                "ours, CLI `git-ckpt create`, warm server",
                lambda: self.warm(*mk),
                self.rewarm,
                False,
            ),
            Side("ours, CLI `git-ckpt create`, own process", lambda: self.own(*mk)),
        ]
        sb = [
            Side("stepback, in-process `Engine.checkpoint()`", lambda: self.sb_call("checkpoint")),
            Side("stepback, CLI `stepback run -- true`", lambda: self.sb_cli("run", "--", "true")),
        ]
        return ours, Side("git plumbing", lambda: measure(self.gck.run)), sb

    def restore_sides(self) -> list[Side]:
        def restore() -> object:
            return self.ck.restore(self.target)

        return [
            Side("ours, in-process `Checkpointer.restore`", lambda: measure(restore)),
            Side("ours, in-process + watcher", lambda: self.watched(restore), self.restamp),
            Side(
                "ours, CLI `git-ckpt restore`, warm server",
                lambda: self.warm("restore", self.target),
                self.rewarm,
                cpu_seen=False,
            ),
            Side(
                "ours, CLI `git-ckpt restore`, own process",
                lambda: self.own("restore", self.target),
            ),
            Side("git `add -A` + `read-tree -m -u`", lambda: measure(self.git_restore)),
            Side(
                "stepback, in-process `Engine.rewind()`",
                lambda: self.sb_call("rewind", self.target_sb),
            ),
            Side(
                "stepback, CLI `stepback rewind ID -y`",
                lambda: self.sb_cli("rewind", str(self.target_sb), "-y"),
            ),
        ]


def rotate(sides: list[Side], k: int) -> list[Side]:
    k %= len(sides)
    return sides[k:] + sides[:k]


# -- the rounds ----------------------------------------------------------------------------


def bench_checkpoints(p: Peers, rounds: int) -> list[Side]:
    ours, gside, sb = p.checkpoint_sides()
    for i in range(-1, rounds):  # round -1: warm-up, not kept
        for j, mine in enumerate(ours):
            theirs = sb[(i + j) % len(sb)]
            if mine.prepare is not None:
                mine.prepare()
            p.mut.step()
            trio = rotate([mine, gside, theirs], i * len(ours) + j)
            walls = {s.name: s.measure() for s in trio}
            for s in (mine, theirs):
                s.git_wall.append(walls[gside.name])
        if i < 0:
            for s in (*ours, gside, *sb):
                s.reset()
            p.full_scans = dict.fromkeys(p.full_scans, 0)
        log(f"  checkpoint round {i + 1}/{rounds}: git {median(gside.wall):.0f} ms")
    return [*ours, gside, *sb]


def bench_restores(p: Peers, rounds: int) -> list[Side]:
    sides = p.restore_sides()
    gside = sides[4]
    for i in range(-1, rounds):
        p.mut.step()
        p.target = p.create()
        p.gck.run()
        p.target_tree = git(p.repo, "rev-parse", f"{p.gck.tip}^{{tree}}")
        p.target_sb = int(p.driver.call("checkpoint")["id"])
        for s in rotate(sides, i):
            if s.prepare is not None:
                s.prepare()
            p.away.step()
            s.measure()
            p.away.check(s.name)
        for s in sides:
            if i < 0:
                s.reset()
            elif s is not gside:
                s.git_wall.append(gside.wall[-1])
        log(f"  restore round {i + 1}/{rounds}: git {median(gside.wall):.0f} ms")
    return sides


# -- the report ----------------------------------------------------------------------------


def row(s: Side, git_side: Side) -> dict[str, Any]:
    g_wall, g_cpu = median(git_side.wall), median(git_side.cpu)
    wall, cpu = median(s.wall), median(s.cpu) if s.cpu_seen else None
    return {
        "side": s.name,
        "rounds": len(s.wall),
        "wall_ms": round(wall, 2),
        "cpu_ms": None if cpu is None else round(cpu, 2),
        "ratio_to_git": round(wall / g_wall, 3),
        "cpu_ratio_to_git": None if cpu is None else round(cpu / g_cpu, 3),
        "paired_ratio_to_git": "—" if s is git_side else paired(s.wall, s.git_wall),
        "samples_ms": {
            "wall": [round(x, 2) for x in s.wall],
            "cpu": [round(x, 2) for x in s.cpu] if s.cpu_seen else None,
            "git_wall_same_round": [round(x, 2) for x in s.git_wall],
        },
    }


def table(title: str, rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        "| side | n | median ms | CPU ms | × git | CPU × git | per-round × git |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        cpu = "—" if r["cpu_ms"] is None else f"{r['cpu_ms']:.1f}"
        cr = "—" if r["cpu_ratio_to_git"] is None else f"{r['cpu_ratio_to_git']:.2f}"
        lines.append(
            f"| {r['side']} | {r['rounds']} | {r['wall_ms']:.1f} | {cpu} "
            f"| {r['ratio_to_git']:.2f} | {cr} | {r['paired_ratio_to_git']} |"
        )
    return [*lines, ""]


def machine_facts(work: Path, sb_venv: Path, a: argparse.Namespace) -> dict[str, Any]:
    sb_py = str(sb_venv / "bin" / "python")
    return {
        "date (UTC)": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "cores (nproc)": run_cmd("nproc") or str(os.cpu_count()),
        "os": platform.platform(),
        "git": run_cmd("git", "--version").removeprefix("git version "),
        "python": platform.python_version(),
        "git-agentckpt": metadata.version("git-agentckpt"),
        "stepback": run_cmd(
            sb_py, "-c", "import importlib.metadata as m; print(m.version('stepback'))"
        ),
        "temp dir file system": run_cmd("stat", "-f", "-c", "%T", str(work)),
        "our CLI": cli_path() + (" (BENCH_CLI_VENV)" if os.environ.get("BENCH_CLI_VENV") else ""),
        "files in tree": a.files,
        "rounds": a.rounds,
        "command": f".venv/bin/python benchmarks/bench_peers.py --files {a.files} "
        f"--rounds {a.rounds}",
        "load average (start)": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def report(facts: dict[str, Any], ckpt: list[Side], rest: list[Side]) -> tuple[str, Any]:
    ck_rows = [row(s, ckpt[4]) for s in ckpt]
    rs_rows = [row(s, rest[4]) for s in rest]
    n = facts["files in tree"]
    lines = [
        f"# git ckpt, git plumbing and stepback side by side ({n:,} files)",
        "",
        "| fact | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in facts.items()),
        "",
    ]
    lines += table("Checkpoint, 10 modified + 5 added files", ck_rows)
    lines += table("Restore, 10 files away (8 modified + 2 added)", rs_rows)
    lines += [
        "Medians of wall time; × git = median / git's median in the same run; per-round "
        "× git = median and quartiles of each sample over git's in the same (sub-)round. "
        "CPU = the process and the children it waited for (stepback's in-process rows: "
        "its driver process); — for the warm server, whose work is not our child.",
        "",
        "## What each side runs",
        "",
        *(__doc__ or "").split("\n\n", 2)[2].splitlines(),
    ]
    doc = {
        "name": f"peers-{n}",
        "facts": facts,
        "rows": {"checkpoint": ck_rows, "restore": rs_rows},
    }
    return "\n".join(lines) + "\n", doc


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument(
        "--stepback-venv",
        type=Path,
        default=None,
        help="a venv with stepback 0.2.0 installed (made here when missing)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args(argv)
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-peers-"))
    pip_env = dict(os.environ)  # pip's own configuration, before HOME is sealed
    try:
        sb_venv = install_stepback(a.stepback_venv or work / "stepback-venv", pip_env)
        seal_environment(work)
        facts = machine_facts(work, sb_venv, a)
        log(f"generating a repository of {a.files:,} files in {work}")
        repo = make_repo(work, a.files)
        git(repo, "repack", "-adq")  # packed, as a clone is (stepback re-hashes every file,
        # and git freshens each loose object it finds again: ~35% of its snapshot at 10k)
        peers = Peers(repo, work, sb_venv, a.files)
        try:
            log(f"checkpoints: {a.rounds} rounds of 4 sub-rounds")
            ckpt = bench_checkpoints(peers, a.rounds)
            scans = dict(peers.full_scans)
            log(f"restores: {a.rounds} rounds")
            rest = bench_restores(peers, a.rounds)
        finally:
            peers.close()
        facts["load average (end)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        for key, n in scans.items():
            facts[f"full scans logged in timed calls, {key} (checkpoint / restore)"] = (
                f"{n} / {peers.full_scans[key] - n}"
            )
        md, doc = report(facts, ckpt, rest)
        name = f"peers-{a.files}"
        (results / f"{name}.md").write_text(md)
        (results / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        print(md)
        log(f"written {results / name}.md and .json")
        return 0
    finally:
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
