"""Shared test helpers: run the CLI in-process or as a real `git ckpt` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from git_agentckpt.cli.main import cli
from git_agentckpt.git.repo import GitRepo

BIN_DIR = os.path.dirname(sys.executable)


def ckpt(repo: Path, *args: str, input: str | None = None, ok: bool = True) -> Result:
    """Run `git ckpt -C repo args…` in-process."""
    result = CliRunner().invoke(cli, ["-C", str(repo), *args], input=input, catch_exceptions=False)
    if ok and result.exit_code != 0:
        raise AssertionError(
            f"git ckpt {' '.join(args)} exited {result.exit_code}: {result.output}"
        )
    return result


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
