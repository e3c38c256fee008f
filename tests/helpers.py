"""Shared test helpers: run the CLI in-process or as a real `git ckpt` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import modes
from click.testing import CliRunner, Result

from git_agentckpt.cli.main import cli
from git_agentckpt.daemon import client
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.git.repo import GitRepo

BIN_DIR = os.path.dirname(sys.executable)
# how a call killed by SIGKILL ends: its own process killed, or, through the daemon, the
# call's child killed and its client exiting 128 + 9 (`daemon/client.py`)
KILLED = (-9, 128 + 9)


def ckpt(repo: Path, *args: str, input: str | None = None, ok: bool = True) -> Result:
    """Run `git ckpt -C repo args…` as the test's mode runs calls (tests/modes.py): through
    the work tree's daemon, or in this process."""
    argv = ["-C", str(repo), *args]
    result = served(argv, input) if daemon_find.enabled(os.environ) else None
    if result is None:
        result = CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)
    if ok and result.exit_code != 0:
        raise AssertionError(
            f"git ckpt {' '.join(args)} exited {result.exit_code}: {result.output}"
        )
    return result


def served(argv: list[str], input: str | None) -> Result | None:
    """`argv` run by the daemon of its work tree (started and waited for), through the
    entry point's own client code, with files for its stdin, stdout and stderr; None
    when the daemon does not run it (no work tree, a refused command): the caller runs
    it here, as the entry point would in its own process."""
    found = None
    if daemon_find.refusal(argv) is None:
        found = daemon_find.discover(daemon_find.start_dir(argv), os.environ)
    if found is None:
        return None
    worktree, git_dir = found
    fp = daemon_find.fingerprint()
    modes.ensure_daemon(worktree, git_dir, fp)
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        stdin.write((input or "").encode())
        stdin.seek(0)
        fds = [f.fileno() for f in (stdin, out, err)]
        status, _why = client.run_remote(git_dir, fp, argv, fds)
        if status is None:
            return None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return Result(
        runner=CliRunner(),
        stdout_bytes=stdout,
        stderr_bytes=stderr,
        output_bytes=stdout + stderr,
        return_value=None,
        exit_code=status,
        exception=None,
    )


def settle(repo: Path) -> None:
    """Wait until the daemon of `repo` (if one runs) has no call running: a served call
    answers before the work it leaves for after its answer (cache files, packing) is done,
    and a test that then edits `.git/agent` by hand must not race that work."""
    found = daemon_find.discover(str(repo), os.environ)
    if found is None:
        return
    from git_agentckpt.cli.commands_server import daemon_status

    for _ in range(3000):
        status = daemon_status(found[1])
        if status is None or not status["calls"]:
            return
        time.sleep(0.01)
    raise AssertionError(f"the daemon of {repo} still runs calls: {status}")


def ckpt_json(repo: Path, *args: str) -> Any:
    return json.loads(ckpt(repo, *args, "--json").stdout)


def real_ckpt(repo: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed `git ckpt` through real git, as a user would."""
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        ["git", "ckpt", *args], cwd=repo, env=env, capture_output=True, text=True, input=input
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def forge_event(repo: Path, task: str, type_: str, payload: dict[str, Any] | None = None) -> None:
    """Write an event as another writer could (a fetched log, a bypassed facade).

    `git ckpt event` refuses the types the tool writes itself; tests that need
    such an event in the log (a stray `step.start`, a dangling `prepare`) write
    it below the facade, through the event log itself.
    """
    import git_agentckpt
    from git_agentckpt.model import NewEvent
    from git_agentckpt.store.refs import TaskName

    log = git_agentckpt.open(str(repo)).log
    log.append(TaskName(task), [NewEvent.from_payload(type_, payload or {}, None)])


def forge_checkpoint(
    repo: Path, tree: str, task: str = "t", assertions: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A full checkpoint of `tree` (any tree object, crafted ones included), as another
    clone's trail could hold it: written below the facade, as `forge_event` writes an
    event. The task is started first if nobody did; `assertions` are `--assert` specs.
    Returns the checkpoint's JSON (`create --json` without `seconds`)."""
    import git_agentckpt
    from git_agentckpt.api import parse_assertion_specs
    from git_agentckpt.store.checkpoints import Draft, Plan
    from git_agentckpt.store.refs import TaskName
    from git_agentckpt.store.state import read_task

    ck = git_agentckpt.open(str(repo))
    t = TaskName(task)
    if ck.store.tip(t) is None:
        ck.task_start(task, "forged")

    def plan() -> Plan:
        view = read_task(ck.store, ck.log, t)
        assert view.state is not None and view.tip is not None
        return Plan(view.state, [], view.head, view.tip.commit)

    checks = parse_assertion_specs(assertions)
    draft = Draft("forged", False, "manual", None, plan, assertions=checks, tree=tree)
    return ck.store.create(t, draft).to_json()


class Gate:
    """A start barrier for processes, on a pipe instead of a clock.

    Each child gets `gate.fd` (pass it with `pass_fds=gate.fds`), says it is ready
    by printing one line, then blocks in `os.read(fd, 1)`. `open()` waits for
    every ready line and closes the write end: every blocked reader wakes at once.
    """

    def __init__(self) -> None:
        self.fd, self._write = os.pipe()
        self.fds = (self.fd,)

    def open(self, ready: list[subprocess.Popen[str]]) -> None:
        os.close(self.fd)  # the children hold their own copies
        for proc in ready:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "ready\n", f"a child did not get ready: {line!r}"
        os.close(self._write)


@contextmanager
def walked() -> Iterator[list[str]]:
    """The commits read back from a tip (`GitRepo.walk`) while inside: real git, the walk
    only counted."""
    seen: list[str] = []
    real = GitRepo.walk

    def counting(self: GitRepo, tip: str) -> Iterator[Any]:
        for info in real(self, tip):
            seen.append(info.id)
            yield info

    GitRepo.walk = counting  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        GitRepo.walk = real  # type: ignore[method-assign]


def remote_and_clones(tmp_path: Path, clone_b: bool = True) -> tuple[Path, Path, Path]:
    """A bare remote, clone `a` with one commit pushed to `main`, and clone `b` of that
    (made only with `clone_b`): the shape of every sharing test."""
    from conftest import git

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    (a / "f").write_text("x\n")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "initial")
    git(a, "push", "-q", "origin", "HEAD:refs/heads/main")
    if clone_b:
        git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(b))
    return remote, a, b
