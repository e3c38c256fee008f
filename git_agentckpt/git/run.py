"""Run real git as a subprocess, on the repository the tool found, nothing else.

Hooks and agents call us with `GIT_DIR`, `GIT_INDEX_FILE`, `GIT_WORK_TREE` and
friends set for *their* git; passing them on as they are would make git act
on the wrong index or tree (a relative `GIT_DIR` means something else in
another directory). So the inherited ones are stripped, and git run in the
work tree of a repository the tool opened gets that repository's git dir and
work tree as `GIT_DIR` / `GIT_WORK_TREE` (`target`, set by `GitRepo`): the
repository git's own discovery chose (`discover.py`), whatever the layout
(`--separate-git-dir`, a linked worktree, a git dir named by the environment).
Variables a caller passes (`GIT_INDEX_FILE` of the private index) and
`--git-dir` / `--work-tree` options (the shadow git dir of verification) still
override them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence

from git_agentckpt.errors import OperationFailed, RepositoryError
from git_agentckpt.git.object_batch import flush_all
from git_agentckpt.git.syserr import git_failure

# Variables that point git at a repository, index or object store.
_REPO_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
)


# work tree -> the variables that point git at its repository (GitRepo sets them)
_TARGETS: dict[str, dict[str, str]] = {}


def target(workdir: str, git_dir: str) -> None:
    """git run in `workdir` (by `run_git`) works on `git_dir` with `workdir` as its tree."""
    _TARGETS[workdir] = {"GIT_DIR": git_dir, "GIT_WORK_TREE": workdir}


def untarget(workdir: str) -> None:
    """git run in `workdir` finds its repository itself (a bare one: its git dir)."""
    _TARGETS.pop(workdir, None)


def keep_object_dirs(workdir: str, dirs: Sequence[str]) -> None:
    """git run in `workdir` (by `run_git`) also reads objects from `dirs`, as alternates
    (read-only): a hook during a push sees the pushed objects in a quarantine directory.
    Kept per repository: an alternate makes git skip writing an object it finds there,
    which another repository opened by the same process would then lack."""
    if dirs:
        env = _TARGETS.setdefault(workdir, {})
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = os.pathsep.join(dirs)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REPO_VARS}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"  # `refs/replace/*` would show a forged object
    env.setdefault("LC_ALL", "C")
    if extra:
        env.update(extra)
    return env


_PREFIXES = ("error:", "fatal:", "warning:", "hint:")
_MAX_LINES = 12  # of one message: a long list of paths is cut, with the count left


def error_lines(stderr: bytes) -> list[str]:
    """git's messages, each whole on one line: an `error:` or `fatal:` line with the
    lines that continue it (git wraps long sentences and lists paths below them).
    When git wrote none of those, its other messages (not `hint:` or `warning:`)."""
    messages: list[list[str]] = []
    for raw in stderr.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(_PREFIXES) or not messages:
            messages.append([line])
        else:
            messages[-1].append(line)
    whole = [_joined(m) for m in messages]
    errors = [m for m in whole if m.startswith(("error:", "fatal:"))]
    others = [m for m in whole if not m.startswith(("warning:", "hint:"))]
    return errors or others or whole


def _joined(lines: list[str]) -> str:
    if len(lines) > _MAX_LINES:
        lines = [*lines[: _MAX_LINES - 1], f"(and {len(lines) - _MAX_LINES + 1} more lines)"]
    return " ".join(lines)


def env_for(
    cwd: str, env: Mapping[str, str] | None = None, *, reads_objects: bool = True
) -> dict[str, str]:
    """The environment `run_git` gives git run in `cwd` (its repository, then `env`).
    Every git the tool runs gets its environment here: objects still in memory are
    written first (`object_batch.flush_all`), unless that git reads no object at all."""
    if reads_objects:
        flush_all()
    return clean_env({**_TARGETS.get(cwd, {}), **(env or {})})


def run_git(
    args: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    reads_objects: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git args…` in `cwd`; raise OperationFailed with git's own message on error.
    `reads_objects` False: a git that reads no object (`check-ignore --no-index`) runs
    without the objects still in memory being written first (`env_for`)."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env_for(cwd, env, reads_objects=reads_objects),
            input=input,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc
    if check and proc.returncode != 0:
        refused = git_failure(proc.stderr, cwd, f"git {subcommand(args)} failed")
        if refused is not None:
            raise refused
        msg = error_lines(proc.stderr)
        last = msg[-1] if msg else f"exit {proc.returncode}"
        raise OperationFailed(f"git {subcommand(args)} failed: {last}")
    return proc


def subcommand(args: Sequence[str]) -> str:
    """The git command in `args`, past global options (`-c x=y`, `--git-dir DIR`)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C", "--git-dir", "--work-tree"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return args[0] if args else "git"


def popen_git(
    args: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None = None,
    *,
    stdin: int = subprocess.DEVNULL,
    stderr: int = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    """`git args…` started with its output on a pipe (the caller streams it), in the
    environment `run_git` gives it; git missing is the one-line error."""
    try:
        return subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=env_for(cwd, env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc


def stream_records(args: Sequence[str], *, cwd: str, chunk: int = 1 << 16) -> Iterator[bytes]:
    """Run `git args…` (its output NUL-separated, e.g. `log -z`) and yield each record as
    git writes it: the caller holds one record at a time, never the whole output."""
    proc = popen_git(args, cwd)
    assert proc.stdout is not None and proc.stderr is not None
    rest = b""
    try:
        while data := proc.stdout.read(chunk):
            parts = (rest + data).split(b"\0")
            rest = parts.pop()
            yield from parts
        if rest:
            yield rest
    finally:
        if proc.poll() is None:  # the caller stopped early (a closed pipe, -n)
            proc.kill()
        stderr = proc.stderr.read()
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if code != 0:
        msg = error_lines(stderr)
        raise OperationFailed(f"git {subcommand(args)} failed: {msg[-1] if msg else code}")
