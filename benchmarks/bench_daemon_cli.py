"""Issue 24's table, through the CLI as users and hooks call it, side by side with git.

    .venv/bin/python benchmarks/bench_daemon_cli.py checkpoint --files 50000 [--wide] [--burst]
    .venv/bin/python benchmarks/bench_daemon_cli.py checkpoint --files 250000 --daemon off
    .venv/bin/python benchmarks/bench_daemon_cli.py history --checkpoints 100 2000
    .venv/bin/python benchmarks/bench_daemon_cli.py changed --files 100000 --since 1000
    .venv/bin/python benchmarks/bench_daemon_cli.py hooks --files 100000
    .venv/bin/python benchmarks/bench_daemon_cli.py memory --files 10000
    .venv/bin/python benchmarks/bench_daemon_cli.py daemons --repos 20

Every timed command is a process (`git-ckpt ...`, or the hook with its JSON on stdin,
as the agent runs it), alternating in each round with git's own command in the same
repository:

- `checkpoint`: 10 tracked files modified and 5 added, then `git-ckpt create -t t`
  against git's plumbing on a persistent private index (`add -A`, `write-tree`,
  `commit-tree`, `update-ref`: `bench_lib.GitCheckpoint`). `--wide`: the tree is 20
  directories of N/20 files. `--burst`: each round is `hook claude-code PostToolUse`,
  `hook claude-code Stop` and `create`, each started as the one before ends (as hooks
  fire), every one of them timed against the plumbing. `--pause` seconds (untimed)
  separate rounds, as an agent's turns do; `--daemon off` runs every call in its own
  process.
- `history`: `create` full and `create --light` back to back on a task of each
  `--checkpoints` count (built through the API), 10k files; the ratio is the long
  task's over the short one's.
- `changed`: `--since` files changed since the task's baseline (in its last
  checkpoint), then `resume t` (clean) and `hook claude-code Stop` against
  `git status --porcelain`.
- `hooks`: `hook claude-code PostToolUse` (a file written before it) and `Stop`
  against `git status --porcelain`.
- `memory`: the resident (RSS) and proportional (PSS) memory of every `git ckpt`
  process of one repository, idle after a few calls.
- `daemons`: a writing call in each of `--repos` repositories: how many daemons run
  after (at most GIT_CKPT_DAEMON_MAX), and after `daemon stop --all`.

The repositories are kept under `--keep DIR` and reused by the next run with the same
shape (their generation takes minutes at 250k files). Not a test: pytest never
collects these files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import (
    GitCheckpoint,
    Mutator,
    cli_env,
    cli_path,
    cpu_model,
    git,
    median,
    seal_environment,
    settle,
    start_server,
    stop_servers,
)

TASK = "t"


def ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def timed_call(repo: Path, env: dict[str, str], *argv: str, stdin: bytes = b"") -> float:
    """Wall ms of one `git-ckpt -C repo argv...` process."""
    return ms(lambda: call(repo, env, *argv, stdin=stdin))


def call(repo: Path, env: dict[str, str], *argv: str, stdin: bytes = b"") -> None:
    proc = subprocess.run(
        [cli_path(), "-C", str(repo), *argv], input=stdin, env=env, capture_output=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git-ckpt {' '.join(argv)}: {proc.returncode} {proc.stderr!r}")
    if argv[0] == "hook" and b"systemMessage" in proc.stdout:
        raise RuntimeError(f"hook {argv[-1]} answered an error: {proc.stdout!r}")


def status_porcelain(repo: Path) -> None:
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True)


# -- repositories --------------------------------------------------------------------------


def wide_path(i: int, dirs: int = 20) -> str:
    return f"w{i % dirs:02d}/f{i:06d}.txt"


def make(root: Path, n: int, wide: bool) -> Path:
    """A repository of `n` small committed files (kept: reused by the next run)."""
    repo = root / f"repo-{n}{'-wide' if wide else ''}"
    if (repo / ".git").is_dir():
        return repo
    from bench_lib import file_path

    tmp = root / f".making-{n}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    git(tmp, "init", "-q")
    path_of = wide_path if wide else file_path
    for i in range(n):
        path = tmp / path_of(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" + "some text for a small source file\n" * 4)
    (tmp / ".gitignore").write_text("*.log\nbuild/\n")
    git(tmp, "add", "-A")
    git(tmp, "commit", "-q", "-m", "initial tree")
    tmp.rename(repo)
    return repo


def fresh_copy(repo: Path, root: Path) -> Path:
    """A copy of `repo` with no task (each run starts from the same tree)."""
    work = root / "work" / repo.name
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(repo), str(work)], check=True)
    shutil.rmtree(work / ".git" / "agent", ignore_errors=True)
    for ref in ("refs/agent", "refs/notes"):
        subprocess.run(["git", "-C", str(work), "update-ref", "-d", ref], capture_output=True)
    subprocess.run(["rm", "-rf", str(work / ".git" / "refs" / "agent")], check=True)
    return work


class WideMutator(Mutator):
    def step(self) -> None:
        self.counter += 1
        for i in self.rng.sample(range(self.n_files), self.n_modify):
            with open(self.repo / wide_path(i), "a", encoding="utf-8") as fh:
                fh.write(f"edit {self.counter}\n")
        for k in range(self.n_new):
            d = self.rng.randrange(20)
            (self.repo / f"w{d:02d}" / f"new-{self.counter:04d}-{k}.txt").write_text("new\n")


def hook_payload(repo: Path, event: str, i: int) -> bytes:
    base: dict[str, object] = {"session_id": "bench-0001", "transcript_path": "", "cwd": str(repo)}
    if event == "PostToolUse":
        path = str(repo / "hook" / f"f{i:04d}.txt")
        doc: dict[str, object] = {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": path, "content": f"round {i}\n"},
            "tool_response": {"type": "create", "filePath": path},
            "tool_use_id": f"toolu_{i}",
        }
    else:
        doc = {**base, "hook_event_name": "Stop", "stop_hook_active": False}
    return json.dumps(doc).encode()


def ratio_line(name: str, ours: list[float], theirs: list[float], target: str) -> str:
    per_round = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
    q = statistics.quantiles(per_round, n=4) if len(per_round) >= 4 else [math_nan()] * 3
    return (
        f"| {name} | {median(ours):.1f} | {median(theirs):.1f} "
        f"| {median(ours) / median(theirs):.2f} | {q[0]:.2f}–{q[2]:.2f} | {target} |"
    )


def math_nan() -> float:
    return float("nan")


HEADER = "| row | ours ms (median) | git ms (median) | ratio | per-round quartiles | target |\n"
HEADER += "|---|---:|---:|---:|---|---|"


# -- rows ----------------------------------------------------------------------------------


def row_checkpoint(args: argparse.Namespace, root: Path) -> list[str]:
    repo = fresh_copy(make(Path(args.keep), args.files, args.wide), root)
    env = cli_env(root, server=args.daemon == "on")
    call(repo, env, "task", "start", TASK, "--goal", "benchmark")
    if args.daemon == "on":
        start_server(env, repo)
    gck = GitCheckpoint(repo, ref="refs/bench/cli")
    mut_cls = WideMutator if args.wide else Mutator
    mut = mut_cls(repo, args.files, n_modify=10, n_new=5)
    (repo / "hook").mkdir(exist_ok=True)
    for _ in range(3):  # warm-up: the watcher's first (full) snapshot, caches
        mut.step()
        call(repo, env, "create", "-t", TASK)
    names = ("PostToolUse", "Stop", "create") if args.burst else ("create",)
    ours: dict[str, list[float]] = {n: [] for n in names}
    theirs: list[float] = []
    for i in range(args.rounds):
        mut.step()
        settle(env, repo)
        time.sleep(args.pause)

        def ours_round(i: int = i) -> None:
            for name in names:
                if args.settle_between:
                    settle(env, repo)
                if name == "create":
                    ours[name].append(timed_call(repo, env, "create", "-t", TASK))
                else:
                    if name == "PostToolUse":
                        (repo / "hook" / f"f{i:04d}.txt").write_text(f"round {i}\n")
                    data = hook_payload(repo, name, i)
                    ours[name].append(
                        timed_call(repo, env, "hook", "claude-code", name, stdin=data)
                    )

        if i % 2:
            theirs.append(ms(gck.run))
            settle(env, repo)
            ours_round()
        else:
            ours_round()
            settle(env, repo)
            theirs.append(ms(gck.run))
    shape = f"{args.files} files{' in 20 directories' if args.wide else ''}"
    mode = "daemon warm" if args.daemon == "on" else "daemon off"
    burst = ", in a burst" if args.burst else f", pause {args.pause} s"
    lines = []
    for name in names:
        label = f"{name}, {shape}, {mode}{burst}"
        lines.append(ratio_line(label, ours[name], theirs, args.target or "vs plumbing"))
    if args.daemon == "on":
        stop_servers(env, root)
    return lines


def build_history(repo: Path, checkpoints: int, events_per: int = 25) -> None:
    """A task of `checkpoints` checkpoints, every second one light, through the API."""
    import git_agentckpt
    from git_agentckpt.model import NewEvent
    from git_agentckpt.store.refs import TaskName

    ck = git_agentckpt.open(str(repo))
    ck.task_start(TASK, goal="a long task")
    for c in range(checkpoints):
        calls = [NewEvent("tool.call", input={"c": c, "e": e}) for e in range(events_per)]
        ck.log.append(TaskName(TASK), calls)
        if c % 2 == 0:
            with open(repo / "d00" / "s0" / "f000000.txt", "a", encoding="utf-8") as fh:
                fh.write(f"edit {c}\n")
        ck.create(TASK, message=f"c{c}", light=bool(c % 2))


def row_history(args: argparse.Namespace, root: Path) -> list[str]:
    base = make(Path(args.keep), args.files, False)
    env = cli_env(root, server=True)
    results: dict[int, dict[str, list[float]]] = {}
    for count in args.checkpoints:
        repo = fresh_copy(base, root / f"h{count}")
        build_history(repo, count)
        start_server(env, repo)
        mut = Mutator(repo, args.files, n_modify=10, n_new=5)
        got: dict[str, list[float]] = {"full": [], "light": [], "list": []}
        for _ in range(3):
            mut.step()
            call(repo, env, "create", "-t", TASK)
        for _ in range(args.rounds):
            mut.step()
            got["full"].append(timed_call(repo, env, "create", "-t", TASK))
            got["light"].append(timed_call(repo, env, "create", "-t", TASK, "--light"))
            got["list"].append(timed_call(repo, env, "list", TASK))
        results[count] = got
        stop_servers(env, root)
    short, long = args.checkpoints[0], args.checkpoints[-1]
    lines = []
    for kind in ("full", "light", "list"):
        a, b = results[long][kind], results[short][kind]
        label = f"`create` {kind}, back to back, {long} vs {short} checkpoints"
        if kind == "list":
            label = f"`list t`, {long} vs {short} checkpoints"
        lines.append(ratio_line(label, a, b, "≤ 1.2×"))
    return lines


def row_changed(args: argparse.Namespace, root: Path) -> list[str]:
    repo = fresh_copy(make(Path(args.keep), args.files, False), root)
    env = cli_env(root, server=True)
    env["GIT_CKPT_TASK"] = TASK
    call(repo, env, "task", "start", TASK, "--goal", "benchmark")
    start_server(env, repo)
    mut = Mutator(repo, args.files, n_modify=args.since, n_new=0)
    mut.step()  # `--since` files changed since the baseline, then in a checkpoint
    call(repo, env, "create", "-t", TASK)
    stop: list[float] = []
    resume: list[float] = []
    status: list[float] = []
    for i in range(args.rounds + 1):
        settle(env, repo)
        time.sleep(args.pause)
        s = timed_call(
            repo, env, "hook", "claude-code", "Stop", stdin=hook_payload(repo, "Stop", i)
        )
        settle(env, repo)
        g = ms(lambda: status_porcelain(repo))
        if i:
            stop.append(s)
            status.append(g)
    statuses: list[float] = []
    for i in range(args.rounds + 1):
        settle(env, repo)
        time.sleep(args.pause)
        r = timed_call(repo, env, "resume", TASK, "--json")
        settle(env, repo)
        g = ms(lambda: status_porcelain(repo))
        if i:
            resume.append(r)
            statuses.append(g)
    stop_servers(env, root)
    shape = f"{args.files} files, {args.since} changed since the baseline"
    return [
        ratio_line(f"resume (clean), {shape}", resume, statuses, "≤ 0.5× git status"),
        ratio_line(f"hook Stop, {shape}", stop, status, "≤ 0.5× git status"),
    ]


def row_hooks(args: argparse.Namespace, root: Path) -> list[str]:
    repo = fresh_copy(make(Path(args.keep), args.files, False), root)
    env = cli_env(root, server=True)
    env["GIT_CKPT_TASK"] = TASK
    call(repo, env, "task", "start", TASK, "--goal", "benchmark")
    start_server(env, repo)
    (repo / "hook").mkdir(exist_ok=True)
    got: dict[str, list[float]] = {"PostToolUse": [], "Stop": []}
    status: dict[str, list[float]] = {"PostToolUse": [], "Stop": []}
    for i in range(args.rounds + 1):
        for event in ("PostToolUse", "Stop"):
            if event == "PostToolUse":
                (repo / "hook" / f"f{i:04d}.txt").write_text(f"round {i}\n")
            settle(env, repo)
            time.sleep(args.pause)
            data = hook_payload(repo, event, i)
            h = timed_call(repo, env, "hook", "claude-code", event, stdin=data)
            settle(env, repo)
            g = ms(lambda: status_porcelain(repo))
            if i:
                got[event].append(h)
                status[event].append(g)
    stop_servers(env, root)
    targets = {"PostToolUse": "≤ 0.5× git status", "Stop": "≤ 1.0× git status"}
    return [
        ratio_line(f"hook {e}, {args.files} files, daemon warm", got[e], status[e], targets[e])
        for e in got
    ]


def memory_of(pid: int) -> tuple[int, int]:
    """RSS and PSS of `pid`, KiB."""
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def ours_under(root: Path) -> list[int]:
    """Processes of git ckpt (daemons and their children) serving a work tree under `root`."""
    found = []
    prefix = os.fsencode(os.path.realpath(root))
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if any(b"git_agentckpt" in a for a in argv) and any(a.startswith(prefix) for a in argv):
            found.append(int(entry.name))
    return found


def row_memory(args: argparse.Namespace, root: Path) -> list[str]:
    repo = fresh_copy(make(Path(args.keep), args.files, False), root)
    env = cli_env(root, server=True)
    call(repo, env, "task", "start", TASK, "--goal", "benchmark")
    start_server(env, repo)
    mut = Mutator(repo, args.files, n_modify=10, n_new=5)
    for _ in range(10):
        mut.step()
        call(repo, env, "create", "-t", TASK)
        call(repo, env, "list")
    settle(env, repo)
    time.sleep(2.0)  # idle
    procs = ours_under(root)
    sizes = [memory_of(p) for p in procs]
    stop_servers(env, root)
    rss = sum(r for r, _ in sizes) / 1024
    pss = sum(p for _, p in sizes) / 1024
    return [
        f"| memory of every git ckpt process of one repository, idle ({len(procs)} "
        f"process(es), {args.files} files) | RSS {rss:.0f} MB, PSS {pss:.0f} MB | — | — | — "
        "| ≤ 60 MB |"
    ]


def row_daemons(args: argparse.Namespace, root: Path) -> list[str]:
    env = cli_env(root, server=True)
    env.pop("GIT_CKPT_DAEMON_MAX", None)
    repos = []
    for i in range(args.repos):
        repo = root / f"r{i:02d}"
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / "f.txt").write_text("x\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "one")
        call(repo, env, "task", "start", TASK, "--goal", "g")
        call(repo, env, "event", TASK, "--type", "note", "--json", "{}")
        repos.append(repo)
    time.sleep(3.0)  # the daemons started in the background, and the ones asked to go
    running = len({p for p in ours_under(root) if _is_daemon(p)})
    subprocess.run([cli_path(), "daemon", "stop", "--all"], env=env, capture_output=True)
    time.sleep(1.0)
    after = len({p for p in ours_under(root) if _is_daemon(p)})
    return [
        f"| daemons running after calls in {args.repos} repositories | {running} | — | — | — "
        f"| ≤ the cap (4) |",
        f"| daemons running after `daemon stop --all` | {after} | — | — | — | 0 |",
    ]


def _is_daemon(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"git_agentckpt.daemon.server" not in fh.read():
                return False
        with open(f"/proc/{pid}/stat", "rb") as fh:
            parent = int(fh.read().rsplit(b")", 1)[1].split()[1])
        with open(f"/proc/{parent}/cmdline", "rb") as fh:
            return b"git_agentckpt.daemon.server" not in fh.read()  # not a call's child
    except (OSError, ValueError, IndexError):
        return False


ROWS = {
    "checkpoint": row_checkpoint,
    "history": row_history,
    "changed": row_changed,
    "hooks": row_hooks,
    "memory": row_memory,
    "daemons": row_daemons,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("row", choices=sorted(ROWS))
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--daemon", choices=("on", "off"), default="on")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pause", type=float, default=0.5)
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--since", type=int, default=1000)
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--target", default="")
    parser.add_argument(
        "--settle-between", action="store_true", help="a burst's calls spaced (a profile)"
    )
    parser.add_argument("--keep", default=os.path.join(tempfile.gettempdir(), "ckpt-bench-repos"))
    args = parser.parse_args()
    Path(args.keep).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-24-"))
    seal_environment(work)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        lines = ROWS[args.row](args, work)
    finally:
        stop_servers(cli_env(work), work)
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(
        f"<!-- {started}, commit {commit}, {os.cpu_count()} cores ({cpu_model()}), "
        f"load {load[0]:.1f}; {' '.join(sys.argv[1:])} -->"
    )
    print(HEADER)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
