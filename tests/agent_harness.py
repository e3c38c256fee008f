"""What the real-agent tests share: the project under test (a repository with a task and
its contract), the agents' environment, running an agent as a process group, and
reading back what `git ckpt` recorded.

The agents run with the sealed test HOME (temporary, from conftest.py), the
worktree's virtualenv first on PATH (so the hooks' `git ckpt` is this checkout's),
and the model server's address; they never reach the network.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_servers import DEADLINE
from conftest import git
from helpers import BIN_DIR, ckpt, real_ckpt, write

TASK = "notes"
CONTRACT = """\
constraints:
  - id: src-frozen
    text: Do not modify anything under src/
    severity: block
    check: {kind: protected_paths, paths: ["src/**"]}
  - id: notes-dir
    text: Every note goes under notes/ as Markdown
    severity: warn
"""
PROSE = """# Rules of this project

Each note ends with a line naming its step.
Never rewrite a note of a done step.
"""
CONSTRAINT_LINES = [
    "[src-frozen] (block) Do not modify anything under src/",
    "[notes-dir] (warn) Every note goes under notes/ as Markdown",
]
STEPS = [("s1", "write notes/a.md"), ("s2", "write notes/b.md"), ("s3", "write notes/c.md")]


def make_task(repo: Path) -> None:
    """`git ckpt init`, the contract (two constraints and the prose rules), and a task of
    three steps bound to both constraints, committed."""
    ckpt(repo, "init")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / ".agent" / "contracts" / "constraints.md", PROSE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract for the notes task")
    args = ["task", "start", TASK, "--goal", "Write the three release notes"]
    for step, title in STEPS:
        args += ["--step", f"{step}:{title}"]
    ckpt(repo, *args, "--constraint", "src-frozen", "--constraint", "notes-dir")


def next_step_line(step: str) -> str:
    return f"**Next step:** {step}"


def assert_brief(text: str, step: str) -> None:
    """What a brief given to the model must state: every constraint and the prose
    rules verbatim, and the next step."""
    for line in CONSTRAINT_LINES:
        assert line in text, f"constraint missing: {line}"
    assert PROSE.rstrip("\n") in text, "the prose of constraints.md is missing"
    assert next_step_line(step) in text, f"next step {step} missing"


# -- running an agent ----------------------------------------------------------------------


def agent_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


@dataclass
class Running:
    """An agent process in its own process group, its output in files."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def wait(self, timeout: float = DEADLINE) -> str:
        """Its stdout once it exited 0 (the group is killed if it outlives `timeout`)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise AssertionError(f"the agent did not finish in {timeout}s: {self.tail()}") from exc
        assert code == 0, f"the agent exited {code}: {self.tail()}"
        return self.out.read_text()

    def kill(self) -> None:
        """SIGKILL the whole group: the agent and every hook it runs."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(DEADLINE)

    def tail(self) -> str:
        return (self.out.read_text()[-1500:] + "\n" + self.err.read_text()[-3000:]).strip()


class Agents:
    """Starts agent processes (each in its own process group, output in files under
    `logs`) and kills every one still running at `close()`: a failing test leaves no
    agent behind to write into the next test's directories."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[Running] = []

    def start(self, argv: Sequence[str], cwd: Path, env: dict[str, str]) -> Running:
        self.logs.mkdir(parents=True, exist_ok=True)
        n = len(self.started)
        out, err = self.logs / f"{n:02d}.out", self.logs / f"{n:02d}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                start_new_session=True,
            )
        running = Running(proc, out, err)
        self.started.append(running)
        return running

    def close(self) -> None:
        for running in self.started:
            if running.proc.poll() is None:
                running.kill()


# -- what git ckpt recorded ---------------------------------------------------------------------


def event_log(repo: Path, task: str = TASK) -> list[dict[str, Any]]:
    done = real_ckpt(repo, "log", task, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def task_state(repo: Path, task: str = TASK) -> dict[str, Any]:
    done = real_ckpt(repo, "task", "show", task, "--json")
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert isinstance(state, dict)
    return state


def checkpoints(repo: Path, task: str = TASK) -> list[dict[str, Any]]:
    done = real_ckpt(repo, "list", task, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, list)
    return found


def hooks_log(repo: Path) -> str:
    path = repo / ".git" / "agent" / "hooks.log"
    return path.read_text() if path.exists() else ""


def files_at(repo: Path, commit: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
