"""A person's confirmation needs a person: stdin must be a terminal (design sections 3, 5).

`git ckpt confirm --by-human` replaces the restatement check by a person's
approval. An agent must not be able to give it to itself from a script or a
hook, so, like `git ckpt trust`, it is refused unless stdin is a terminal. The
check lives here, below the CLI, so `Checkpointer.confirm(..., by_human=True)`
from Python is refused the same way. It stops scripts, hooks and agents whose
commands run without a terminal; a process that fakes one (a pseudo-terminal)
is not told apart from a person.
"""

from __future__ import annotations

import sys
from pathlib import Path

from git_agentckpt.contracts.schema import load_contract_dir
from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON
from git_agentckpt.recovery.brief import next_step
from git_agentckpt.recovery.context import constraints_for_state
from git_agentckpt.settings import CONTRACTS_DIR
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace


class NeedsTerminal(UsageError):
    """A person's approval was asked for where no person can answer (exit status 2)."""


def stdin_is_terminal() -> bool:
    """Whether a person can answer here (the seam tests replace: CliRunner's stdin is none)."""
    stdin = sys.stdin
    try:
        return stdin is not None and stdin.isatty()
    except (OSError, ValueError):  # closed or detached
        return False


def require_person(task: str) -> None:
    if not stdin_is_terminal():
        raise NeedsTerminal(
            f"confirm --by-human needs a person at a terminal, and stdin is not a terminal: "
            f"task {task} stays recovering",
            hint=f"run `git ckpt confirm {task} --by-human` in a terminal, or confirm with "
            f"`--restatement FILE` (checked)",
        )


def approval_subject(ck: Workspace, task_name: str) -> dict[str, JSON]:
    """What the person approves: goal, every constraint in force, done and next step."""
    task = TaskName(task_name)
    state = ck.state(task)
    if state.get("status") != "recovering":
        raise UsageError(
            f"task {task} is not recovering (status {state.get('status')})",
            hint=f"run `git ckpt resume {task}` first",
        )
    contract = load_contract_dir(Path(ck.repo.workdir) / CONTRACTS_DIR)
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    return {
        "task": str(task),
        "goal": state.get("goal", ""),
        "constraints": [
            {"id": c["id"], "severity": c["severity"], "text": c["text"]}
            for c in constraints_for_state(ck.repo, contract, state)
        ],
        "done_steps": [str(s["id"]) for s in steps if s.get("status") == "done"],
        "next_step": next_step(state),
    }
