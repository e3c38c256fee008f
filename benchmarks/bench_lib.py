"""Shared helpers of the benchmark suite: a sealed environment, generated repositories,
git's own equivalent of a checkpoint, statistics and the report.

Not tests: pytest never collects these files (`bench_*.py`); `benchmarks/run.sh` runs them.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Variables that would point git (or us) at another repository, index or config.
_STRIPPED_PREFIXES = ("GIT_", "GIT_CKPT_")


def seal_environment(root: Path) -> Path:
    """Temporary HOME and XDG dirs, no system config, a fixed identity.

    Must run before `git_agentckpt` (and so pygit2/libgit2) is imported: libgit2
    reads its configuration search path once, at initialisation.
    """
    home = root / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    for name in list(os.environ):
        if name.startswith(_STRIPPED_PREFIXES):
            del os.environ[name]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
        }
    )
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench User\n\temail = bench@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
        "[gc]\n\tauto = 0\n"
        "[advice]\n\tdetachedHead = false\n"
    )
    return home


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment our own `run_git` gives git (GIT_OPTIONAL_LOCKS=0, LC_ALL=C)."""
    env = dict(os.environ)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def git(cwd: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes = b"") -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=git_env(env),
        input=stdin,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().strip()


# -- machine facts ----------------------------------------------------------------------


def run_cmd(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# -- generated repositories ---------------------------------------------------------------


def file_path(i: int) -> str:
    """File `i` of the tree: 100 top-level dirs x 10 subdirs, files spread round-robin."""
    return f"d{i % 100:02d}/s{(i // 100) % 10}/f{i:06d}.txt"


def make_repo(root: Path, n_files: int) -> Path:
    """A repository with `n_files` small committed text files."""
    repo = root / f"repo-{n_files}"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for i in range(n_files):
        path = repo / file_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" + "some text for a small source file\n" * 4)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial tree")
    return repo


@dataclass
class Mutator:
    """Each `step()` modifies `n_modify` tracked files and adds `n_new` untracked ones."""

    repo: Path
    n_files: int
    n_modify: int = 20
    n_new: int = 2
    rng: random.Random = field(default_factory=lambda: random.Random(42))
    counter: int = 0

    def step(self) -> None:
        self.counter += 1
        for i in self.rng.sample(range(self.n_files), self.n_modify):
            with open(self.repo / file_path(i), "a", encoding="utf-8") as fh:
                fh.write(f"edit {self.counter}\n")
        for k in range(self.n_new):
            d = self.rng.randrange(100)
            path = self.repo / f"d{d:02d}/s{k}/new-{self.counter:04d}-{k}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"new file {self.counter}/{k}\n")


class GitCheckpoint:
    """git's own checkpoint: `add -A` into a persistent private index + `write-tree` +
    `commit-tree` + `update-ref` (compare-and-swap): 4 subprocesses."""

    def __init__(self, repo: Path, ref: str = "refs/bench/x") -> None:
        self.repo = repo
        self.ref = ref
        self.index = repo / ".git" / "bench-index"
        # seeded once from the user's index, mtime kept (as our private index is)
        shutil.copy2(repo / ".git" / "index", self.index)
        self.env = {"GIT_INDEX_FILE": str(self.index)}
        self.tip = git(repo, "rev-parse", "HEAD")
        self.count = 0
        self.last_steps: dict[str, float] = {}

    def run(self) -> None:
        self.count += 1
        t0 = time.perf_counter()
        git(self.repo, "add", "-A", env=self.env)
        t1 = time.perf_counter()
        tree = git(self.repo, "write-tree", env=self.env)
        t2 = time.perf_counter()
        commit = git(
            self.repo, "commit-tree", tree, "-p", self.tip, "-m", f"bench checkpoint {self.count}"
        )
        t3 = time.perf_counter()
        old = self.tip if self.count > 1 else "0" * 40  # the ref must not exist yet
        git(self.repo, "update-ref", "-m", "bench", self.ref, commit, old)
        t4 = time.perf_counter()
        self.tip = commit
        self.last_steps = {
            "add -A": (t1 - t0) * 1000.0,
            "write-tree": (t2 - t1) * 1000.0,
            "commit-tree": (t3 - t2) * 1000.0,
            "update-ref": (t4 - t3) * 1000.0,
        }


def bench_event(i: int) -> dict[str, Any]:
    return {"type": "tool.call", "input": f"pytest -q tests/test_{i % 50}.py", "output": "ok"}


def git_event_body(n: int) -> bytes:
    line = (
        '{"v":1,"id":"01JBENCHBENCHBENCHBENCHBENC","seq":%d,"ts":"2026-01-01T00:00:00.000Z",'
        '"task":"x","type":"tool.call","input":"pytest -q tests/test_1.py","output":"ok"}'
    )
    return ("tool.call\n\n" + "\n".join(line % i for i in range(n)) + "\n").encode()


class GitEventAppend:
    """git's own append: `commit-tree` (empty tree, body on stdin) + `update-ref` (CAS)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.empty = git(repo, "hash-object", "-t", "tree", "-w", "--stdin")
        self.tip: str | None = None

    def run(self, body: bytes) -> None:
        parents = ["-p", self.tip] if self.tip else []
        commit = git(self.repo, "commit-tree", self.empty, *parents, "-F", "-", stdin=body)
        git(self.repo, "update-ref", "refs/bench/events", commit, self.tip or "0" * 40)
        self.tip = commit


# -- the CLI ------------------------------------------------------------------------------


def cli_python() -> str:
    """The interpreter of the CLI under test: run.sh's non-editable install, or ours."""
    venv = os.environ.get("BENCH_CLI_VENV")
    return os.path.join(venv, "bin", "python") if venv else sys.executable


def cli_path() -> str:
    exe = Path(cli_python()).parent / "git-ckpt"
    found = str(exe) if exe.exists() else shutil.which("git-ckpt")
    if not found:
        raise SystemExit("git-ckpt is not installed in the venv: run `.venv/bin/pip install -e .`")
    return found


def cli_env(work: Path, server: bool = True) -> dict[str, str]:
    """Like an installed package: bytecode cached (in the temp dir, not in the source tree).

    `server`: calls are handed to the work tree's daemon (the default for users), or
    each runs in its own process (GIT_CKPT_DAEMON=off).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    for name in ("GIT_CKPT_DAEMON", "GIT_CKPT_SERVER"):
        env[name] = "auto" if server else "off"
    env["GIT_CKPT_DAEMON_IDLE"] = "600"
    env["GIT_CKPT_DAEMON_TIMEOUT"] = "5"  # a busy machine: a late daemon still serves
    return env


def start_server(env: Mapping[str, str], repo: Path) -> None:
    """Start the daemon of `repo`'s work tree (its first call would start it on its own).

    The daemon is per work tree: a benchmark that times warm calls in a repository
    starts that repository's daemon first, so no timed call runs cold.
    """
    run_cli([cli_path(), "-C", str(repo), "daemon", "start"], env)


def stop_servers(env: Mapping[str, str], root: Path) -> None:
    """Stop every daemon serving a work tree under `root` (a benchmark's temp directory)."""
    for worktree in sorted(_daemon_worktrees(root)):
        subprocess.run(
            [cli_path(), "-C", worktree, "daemon", "stop"],
            capture_output=True,
            check=False,
            env=env,
        )


def settle(env: Mapping[str, str], repo: Path, timeout: float = 5.0) -> None:
    """Wait (untimed) until the daemon of `repo` runs no call: a served call answers first
    and then finishes its tidying (cache files, packing; `after_reply.py`), as it does
    between an agent's calls. The next timed command, ours or git's, then does not share
    the CPU with it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = subprocess.run(
            [cli_path(), "-C", str(repo), "daemon", "status", "--json"],
            capture_output=True,
            check=False,
            env=env,
        )
        try:
            status = json.loads(proc.stdout)
        except ValueError:
            return
        if not status.get("calls"):
            return
        time.sleep(0.005)


def _daemon_worktrees(root: Path) -> set[str]:
    """Work trees under `root` with a running daemon (its argv ends with the work tree)."""
    prefix = os.fsencode(os.path.realpath(root))
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = len(argv) >= 4 and any(b"git_agentckpt.daemon.server" in a for a in argv)
        if ours and argv[-2].startswith(prefix):  # argv[-1] is empty (a trailing NUL)
            found.add(os.fsdecode(argv[-2]))
    return found


def run_cli(argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")


# -- timing and statistics ----------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    """Wall time of `fn()` in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def _cpu_now() -> float:
    """CPU seconds of this process plus its waited-for children (user + system)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def alternate(i: int, first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run both, `first` first in even rounds and second in odd ones."""
    if i % 2 == 0:
        first()
        second()
    else:
        second()
        first()


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def p95(xs: Sequence[float]) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def paired(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """Median and quartiles of the per-round ratios (rounds alternate which runs first)."""
    ratios = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
    if len(ratios) < 4:
        return "too few rounds"
    q = statistics.quantiles(ratios, n=4)
    return f"median {median(ratios):.2f}, quartiles {q[0]:.2f}–{q[2]:.2f}"


@dataclass
class Series:
    """Samples of one operation: wall time, and CPU time of us + our children (ms).

    CPU time moves less than wall time when other processes load the machine.
    """

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, fn: Callable[[], object]) -> None:
        c0 = _cpu_now()
        t0 = time.perf_counter()
        fn()
        self.wall.append((time.perf_counter() - t0) * 1000.0)
        self.cpu.append((_cpu_now() - c0) * 1000.0)

    @property
    def med(self) -> float:
        return median(self.wall)

    @property
    def cpu_med(self) -> float:
        return median(self.cpu)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or math.isnan(a) or math.isnan(b) or b <= 0:
        return None
    return a / b


@dataclass
class Row:
    """One line of the report: medians (ms) of ours and of git's equivalent."""

    metric: str
    ours: float
    git: float | None = None
    ours_cpu: float | None = None
    git_cpu: float | None = None
    budget: str = ""
    ok: bool | None = None
    note: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, metric: str, ours: Series, git: Series | None = None, **kw: Any) -> Row:
        samples = {"ours_wall": ours.wall, "ours_cpu": ours.cpu}
        if git is not None:
            samples |= {"git_wall": git.wall, "git_cpu": git.cpu}
        return cls(
            metric,
            ours.med,
            None if git is None else git.med,
            ours.cpu_med,
            None if git is None else git.cpu_med,
            samples=samples,
            **kw,
        )

    @property
    def ratio(self) -> float | None:
        return _ratio(self.ours, self.git)

    @property
    def cpu_ratio(self) -> float | None:
        return _ratio(self.ours_cpu, self.git_cpu)

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None or math.isnan(x) else round(x, 3)

        return {
            "metric": self.metric,
            "ours_ms": r(self.ours),
            "git_ms": r(self.git),
            "ratio": r(self.ratio),
            "ours_cpu_ms": r(self.ours_cpu),
            "git_cpu_ms": r(self.git_cpu),
            "cpu_ratio": r(self.cpu_ratio),
            "budget": self.budget,
            "within_budget": self.ok,
            "note": self.note,
            "samples_ms": {k: [round(x, 3) for x in v] for k, v in self.samples.items()},
        }


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or math.isnan(x):
        return "—"
    return f"{x:.{digits}f}"


def markdown(title: str, facts: Mapping[str, Any], rows: Sequence[Row]) -> str:
    lines = [f"# {title}", ""]
    lines += ["| fact | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in facts.items()]
    lines += [
        "",
        "| metric | ours (ms, median) | git (ms, median) | ratio | CPU ours / git (ms) "
        "| CPU ratio | budget | ok |",
        "|---|---:|---:|---:|---:|---:|---|:-:|",
    ]
    for r in rows:
        ok = "" if r.ok is None else ("yes" if r.ok else "**NO**")
        d = 2 if r.ours < 10 else 1
        cpu = "" if r.ours_cpu is None else f"{_fmt(r.ours_cpu, d)} / {_fmt(r.git_cpu, d)}"
        lines.append(
            f"| {r.metric} | {_fmt(r.ours, d)} | {_fmt(r.git, d)} | {_fmt(r.ratio, 2)} "
            f"| {cpu} | {_fmt(r.cpu_ratio, 2)} | {r.budget} | {ok} |"
        )
    notes = [f"- *{r.metric}*: {r.note}" for r in rows if r.note]
    lines += [
        "",
        "Ratios are ours / git, of medians. Wall time decides the budgets; CPU time "
        "(this process + its children, user + system) is shown because it moves less than "
        "wall time when other work loads the machine (compare the load averages). "
        "For steadier ratios, raise `--rounds`.",
    ]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"
