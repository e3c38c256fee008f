"""A not-ready task: what keeps it there, and whether that still holds.

A resume leaves a task `not_ready` (the state machine's `block` move,
`lifecycle.py`) for one of three reasons, recorded in its state
(`recovery.blocked`): source files that drifted (`drift`) or assertions that fail
with no rollback (`assertions`) wait for a person (`git ckpt resume --restore` or
`--accept-drift`); a block constraint that fails (`constraints`) waits until it
passes, checked again when the agent confirms. Until then the task moves no step and
takes no checkpoint of its own.
"""

from __future__ import annotations

from git_agentckpt.contracts.engine import evaluate_for_resume
from git_agentckpt.errors import NotReadyError
from git_agentckpt.git.worktree import snapshot_tree
from git_agentckpt.lifecycle import CONSTRAINTS, blocked_by, not_ready
from git_agentckpt.model import JSON
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

FAILS = ("fail", "error")


def failing_blocks(ws: Workspace, task: TaskName) -> list[str]:
    """The block constraints that fail on the working tree now (trusted commands only)."""
    tree = snapshot_tree(ws.repo, ws.settings.secret_paths)
    rows = evaluate_for_resume(ws, task, tree).to_json().get("constraints") or []
    return [
        str(c["id"])
        for c in rows
        if isinstance(c, dict) and c.get("severity") == "block" and c.get("status") in FAILS
    ]


def require_ready_now(ws: Workspace, task: TaskName, state: dict[str, JSON]) -> None:
    """Raise NotReadyError (exit 14) unless what made the task not ready is gone."""
    if blocked_by(state) != CONSTRAINTS:
        raise not_ready(task.name, state)
    failing = failing_blocks(ws, task)
    if failing:
        raise NotReadyError(
            f"task {task} is not ready: block constraint(s) {', '.join(failing)} still fail",
            hint=f"fix them (`git ckpt check -t {task}` says how), then confirm again",
        )
