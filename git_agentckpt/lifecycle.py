"""The task's state machine: every status a step or a task can have, every move between
them, and who may make it.

One table. The store refuses any other move, before anything is written
(`store/workspace.py`, `recovery/`); replay skips any other move a log holds (a forged
or foreign trail, `model.apply_event`); and the diagram in `docs/state-machine.md` is
drawn from it (`diagram()`; `tests/test_lifecycle.py` checks that they agree).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from git_agentckpt.errors import NotReadyError, UsageError

TASK_STATUSES = ("active", "recovering", "not_ready", "done", "failed")
STEP_STATUSES = ("pending", "in_progress", "done", "failed", "skipped")
# a task waiting for its recovery to be confirmed: no step moves, no checkpoint of its own
PAUSED = ("recovering", "not_ready")
NEW = "new"  # a task before `task start`: the source of its first move

AGENT, PERSON, TOOL = "agent", "person", "tool"
PATCH = "create --state"  # the moves a state patch makes


@dataclass(frozen=True)
class Move:
    """`name` takes a step (or task) from any of `sources` to `target`; `by` may make it,
    with `how` (the command)."""

    name: str
    sources: tuple[str, ...]
    target: str
    by: tuple[str, ...]
    how: str


STEP_MOVES = (
    Move("start", ("pending",), "in_progress", (AGENT,), "step start"),
    Move("restart", ("in_progress",), "in_progress", (AGENT,), "step start"),
    Move("retry", ("failed",), "in_progress", (AGENT,), "step start"),
    Move("redo", ("done", "skipped"), "in_progress", (AGENT,), "step start --redo"),
    Move("done", ("in_progress",), "done", (AGENT,), "step done"),
    Move("fail", ("in_progress",), "failed", (AGENT,), "step fail"),
    Move("skip", ("pending", "failed"), "skipped", (AGENT,), PATCH),
    Move("rollback", ("in_progress", "done", "failed"), "pending", (TOOL,), "resume"),
)

# a resume starts from any status: a finished task ends before (next step none), and a
# `done` whose step-end checkpoints are not in the history is not trusted
RESUMABLE = ("active", "recovering", "not_ready", "failed", "done")
TASK_MOVES = (
    Move("start", (NEW,), "active", (AGENT,), "task start"),
    Move("resume", RESUMABLE, "recovering", (TOOL,), "resume"),
    Move("block", RESUMABLE, "not_ready", (TOOL,), "resume"),
    Move("confirm", ("recovering", "not_ready"), "active", (AGENT, PERSON), "confirm"),
    Move("finish", ("active",), "done", (TOOL,), "step done"),
    Move("reopen", ("done",), "active", (AGENT,), "step start --redo"),
    Move("give_up", ("active",), "failed", (AGENT,), PATCH),
    Move("revive", ("failed",), "active", (AGENT,), PATCH),
)

# why a task is not ready (`recovery.blocked` in its state): drift and failing assertions
# wait for a person's decision at a resume; a failing block constraint, until it passes
# (`confirm` checks it again: recovery/not_ready.py)
DRIFT, ASSERTIONS, CONSTRAINTS = "drift", "assertions", "constraints"
_BLOCKED = {
    DRIFT: "source files drifted at its resume, and a person decides",
    ASSERTIONS: "assertions failed at its resume, and a person decides",
    CONSTRAINTS: "a block constraint failed at its resume",
}


def blocked_by(state: Mapping[str, Any]) -> str:
    """Why a not-ready task is not ready (`constraints` when its record does not say)."""
    recovery = state.get("recovery")
    reason = recovery.get("blocked") if isinstance(recovery, dict) else None
    return reason if reason in (DRIFT, ASSERTIONS) else CONSTRAINTS


def not_ready(task: str, state: Mapping[str, Any]) -> NotReadyError:
    """The refusal of any move of a not-ready task but a resume (and, once its block
    constraints pass, a confirm): exit 14, with what ends it."""
    reason = blocked_by(state)
    if reason == CONSTRAINTS:
        hint = (
            f"fix it (`git ckpt check -t {task}` names it), then "
            f"`git ckpt confirm {task} --restatement FILE`"
        )
    else:
        hint = (
            f"run `git ckpt resume {task}` once a person has decided (with --restore to bring "
            "the checkpoint's files back, or --accept-drift to keep these)"
        )
    return NotReadyError(f"task {task} is not ready: {_BLOCKED[reason]}", hint=hint)


class MoveRefused(UsageError):
    """A move the state machine does not allow from the current status (exit 2); nothing
    was written."""


def _find(moves: tuple[Move, ...], name: str) -> Move:
    for move in moves:
        if move.name == name:
            return move
    raise KeyError(name)


def moves_from(moves: tuple[Move, ...], status: str) -> list[Move]:
    return [m for m in moves if status in m.sources]


def _allowed_text(moves: tuple[Move, ...], status: str) -> str:
    found = moves_from(moves, status)
    if not found:
        return f"nothing moves a {status} one"
    return "from " + status + ": " + ", ".join(f"{m.name} (`{m.how}`)" for m in found)


def step_move(step: str, status: str, name: str) -> Move:
    """The move `name` of step `step` from `status`; MoveRefused if it is not allowed."""
    return _checked(STEP_MOVES, f"step {step!r}", status, name)


def task_move(task: str, status: str, name: str) -> Move:
    """The move `name` of task `task` from `status`; MoveRefused if it is not allowed."""
    return _checked(TASK_MOVES, f"task {task}", status, name)


def _checked(moves: tuple[Move, ...], what: str, status: str, name: str) -> Move:
    move = _find(moves, name)
    if status not in move.sources:
        kind = what.split(" ", 1)[0]
        raise MoveRefused(
            f"{what} is {status}: {name} moves only a {kind} that is " + " or ".join(move.sources),
            hint=_allowed_text(moves, status),
        )
    return move


def patch_move(moves: tuple[Move, ...], status: str, target: str) -> Move | None:
    """The move a state patch (`create --state`) makes by setting a step (or the task,
    with `TASK_MOVES`) from `status` to `target`; None: no patch may do that."""
    for move in moves:
        if status in move.sources and move.target == target and move.how == PATCH:
            return move
    return None


def diagram() -> str:
    """The state machine as Mermaid state diagrams (`docs/state-machine.md`)."""
    out: list[str] = []
    for title, moves in (("Task", TASK_MOVES), ("Step", STEP_MOVES)):
        out += [f"### {title}", "", "```mermaid", "stateDiagram-v2"]
        if title == "Step":
            out.append("    [*] --> pending: task start")
        for move in moves:
            for source in move.sources:
                start = "[*]" if source == NEW else source
                label = f"{move.name} ({'/'.join(move.by)}: {move.how})"
                out.append(f"    {start} --> {move.target}: {label}")
        out += ["```", ""]
    return "\n".join(out)


def table() -> str:
    """The same moves as a Markdown table (`docs/state-machine.md`)."""
    rows = ["| of | move | from | to | by | command |", "|---|---|---|---|---|---|"]
    for what, moves in (("task", TASK_MOVES), ("step", STEP_MOVES)):
        for m in moves:
            rows.append(
                f"| {what} | {m.name} | {', '.join(m.sources)} | {m.target} "
                f"| {', '.join(m.by)} | `git ckpt {m.how}` |"
            )
    return "\n".join(rows) + "\n"
