"""Dataclasses and the v1 JSON formats of events, task state and checkpoints (pure)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from git_agentckpt.errors import BadStateError, UnknownVersion
from git_agentckpt.lifecycle import (
    STEP_MOVES,
    STEP_STATUSES,
    TASK_MOVES,
    TASK_STATUSES,
    MoveRefused,
    patch_move,
    step_move,
    task_move,
)
from git_agentckpt.paths import store_json

FORMAT_VERSION = 1
JSON = Any  # a JSON value (dict/list/str/int/float/bool/None)

StepStatus = Literal["pending", "in_progress", "done", "failed", "skipped"]
START_MOVES = {"pending": "start", "in_progress": "restart", "failed": "retry"}
# the moves a `state.update` of the tool or a person makes (`data.move`); the agent's
# state.update events carry a patch and no move
TOOL_UPDATES = ("block", "confirm")
STATE_EVENTS = ("task.start", "step.start", "step.end", "state.update")
REFUSED_START_EVENT = "step.start_refused"  # `step start` refused a done or skipped step

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
_STEP_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def new_ulid(now: float | None = None) -> str:
    """A 26-character ULID: 48-bit millisecond time + 80 random bits, sortable."""
    ms = int((time.time() if now is None else now) * 1000)
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


def is_ulid(text: str) -> bool:
    return bool(_ID_RE.match(text))


def iso_now(now: float | None = None) -> str:
    ts = time.time() if now is None else now
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(value: JSON) -> str:
    """Canonical compact JSON: sorted keys, UTF-8; a file name's raw byte as `\\udcXX`
    (`paths.store_json`: read back as the same name)."""
    return store_json(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def check_version(obj: Mapping[str, JSON], what: str) -> None:
    v = obj.get("v")
    if v != FORMAT_VERSION:
        raise UnknownVersion(
            f"{what} has format version {v!r}, this git-ckpt reads version {FORMAT_VERSION}",
            hint="upgrade git-agentckpt (pip install -U git-agentckpt)",
        )


@dataclass(frozen=True)
class RunInfo:
    """What an agent tells us about the run: recorded in `env` and `usage`."""

    model: str | None = None
    model_version: str | None = None
    params: Mapping[str, JSON] = field(default_factory=dict)
    usage: Mapping[str, JSON] = field(default_factory=dict)


# -- events ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    id: str
    seq: int
    ts: str
    task: str
    type: str
    actor: dict[str, JSON] = field(default_factory=dict)
    input: JSON = None
    output: JSON = None
    links: dict[str, JSON] = field(default_factory=dict)
    data: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "v": FORMAT_VERSION,
            "id": self.id,
            "seq": self.seq,
            "ts": self.ts,
            "task": self.task,
            "type": self.type,
            "actor": self.actor,
        }
        if self.input is not None:
            out["input"] = self.input
        if self.output is not None:
            out["output"] = self.output
        if self.links:
            out["links"] = self.links
        if self.data:
            out["data"] = self.data
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, JSON]) -> Event:
        check_version(obj, "event")
        try:
            return cls(
                id=str(obj["id"]),
                seq=int(obj["seq"]),
                ts=str(obj["ts"]),
                task=str(obj["task"]),
                type=str(obj["type"]),
                actor=dict(obj.get("actor") or {}),
                input=obj.get("input"),
                output=obj.get("output"),
                links=dict(obj.get("links") or {}),
                data=dict(obj.get("data") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadStateError(f"malformed event: {exc}") from exc

    @classmethod
    def from_cache(cls, obj: Mapping[str, JSON]) -> Event:
        """An event from a cache this tool wrote from checked events and sealed with its
        digest (`store/log_index.py`): the stored fields as they are, without the checks
        and copies of `from_json` (a resume of a long task reads ~1,100 such events in
        every process). A malformed record raises KeyError or TypeError: the cache is
        then rebuilt from the log."""
        ev = cls.__new__(cls)
        ev.__dict__.update(
            id=obj["id"],
            seq=obj["seq"],
            ts=obj["ts"],
            task=obj["task"],
            type=obj["type"],
            actor=obj.get("actor") or {},
            input=obj.get("input"),
            output=obj.get("output"),
            links=obj.get("links") or {},
            data=obj.get("data") or {},
        )
        return ev

    def summary(self) -> str:
        """One readable line: the subject of the event's commit."""
        return summary_of(self.seq, self.type, self.links, self.actor, self.data)


def summary_of(
    seq: JSON, type_: str, links: Mapping[str, JSON], actor: Mapping[str, JSON], data: Any
) -> str:
    """`Event.summary` from the fields."""
    return f"#{seq} " + summary_words(type_, links, actor, data)


def summary_words(
    type_: str, links: Mapping[str, JSON], actor: Mapping[str, JSON], data: Any
) -> str:
    """The summary without its `#seq `: `tool.call step=s1 by claude - message` (a
    reader of a long log calls it per line: written for speed)."""
    text = str(type_)
    if links:
        step = links.get("step")
        if step:
            text += f" step={step}"
        ckpt = links.get("checkpoint")
        if isinstance(ckpt, str):
            text += f" checkpoint={ckpt[:12]}"
    agent = actor.get("agent")
    if agent:
        text += f" by {agent}"
    if isinstance(data, dict):
        message = data.get("message") or data.get("status")
        if isinstance(message, str) and message:
            text += f" - {message[:60]}"
    return text


@dataclass(frozen=True)
class NewEvent:
    """An event as a caller proposes it: id, seq, ts and task are assigned on append."""

    type: str
    actor: dict[str, JSON] = field(default_factory=dict)
    input: JSON = None
    output: JSON = None
    links: dict[str, JSON] = field(default_factory=dict)
    data: dict[str, JSON] = field(default_factory=dict)

    @classmethod
    def from_payload(cls, type_: str, payload: Mapping[str, JSON], actor: str | None) -> NewEvent:
        """From the `--json` payload of `git ckpt event`: known keys, the rest as data."""
        known = {"input", "output", "links", "actor", "checkpoint", "step"}
        links = dict(payload.get("links") or {})
        for key in ("checkpoint", "step"):
            if key in payload:
                links[key] = payload[key]
        who = dict(payload.get("actor") or {})
        if actor:
            who["agent"] = actor
        return cls(
            type=type_,
            actor=who,
            input=payload.get("input"),
            output=payload.get("output"),
            links=links,
            data={k: v for k, v in payload.items() if k not in known},
        )


_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")


def check_event_type(type_: str) -> None:
    if not _TYPE_RE.match(type_):
        raise BadStateError(
            f"invalid event type {type_!r}",
            hint="use dotted lower-case words such as tool.call or model.call",
        )


# -- task state ------------------------------------------------------------------------


def new_state(
    task: str, goal: str, steps: list[tuple[str, str]], constraints: list[str]
) -> dict[str, JSON]:
    state: dict[str, JSON] = {
        "v": FORMAT_VERSION,
        "task": task,
        "goal": goal,
        "status": "active",
        "steps": [
            {"id": sid, "title": title, "status": "pending", "inputs": [], "outputs": None}
            for sid, title in steps
        ],
        "current_step": None,
        "constraints": list(constraints),
        "env": {},
        "usage": {},
        "summary": {"text": "", "authoritative": False},
    }
    return normalize_state(state)


def _steps(state: Mapping[str, JSON]) -> list[dict[str, JSON]]:
    return cast(list[dict[str, JSON]], state.get("steps") or [])


def find_step(state: Mapping[str, JSON], step_id: str) -> dict[str, JSON] | None:
    for step in _steps(state):
        if step.get("id") == step_id:
            return step
    return None


def normalize_state(state: dict[str, JSON]) -> dict[str, JSON]:
    """Validate shape and recompute the derived `todo` and `done` lists."""
    check_version(state, "task state")
    if not isinstance(state.get("task"), str):
        raise BadStateError("task state needs a string 'task'")
    if not isinstance(state.get("goal", ""), str):
        raise BadStateError("task state 'goal' must be a string")
    if state.get("status", "active") not in TASK_STATUSES:
        raise BadStateError(
            f"task status {state.get('status')!r} is not one of {', '.join(TASK_STATUSES)}"
        )
    steps = state.get("steps", [])
    if not isinstance(steps, list):
        raise BadStateError("task state 'steps' must be a list")
    seen: set[str] = set()
    for step in steps:
        if not isinstance(step, dict) or not isinstance(step.get("id"), str):
            raise BadStateError("every step needs a string 'id'")
        sid = step["id"]
        if not _STEP_ID_RE.match(sid):
            raise BadStateError(f"invalid step id {sid!r}", hint="use [A-Za-z0-9_.-], at most 64")
        if sid in seen:
            raise BadStateError(f"step id {sid!r} appears twice")
        seen.add(sid)
        step.setdefault("title", sid)
        step.setdefault("status", "pending")
        step.setdefault("inputs", [])
        step.setdefault("outputs", None)
        if step["status"] not in STEP_STATUSES:
            raise BadStateError(
                f"step {sid!r} has status {step['status']!r}, not one of {', '.join(STEP_STATUSES)}"
            )
    constraints = state.setdefault("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise BadStateError("task state 'constraints' must be a list of constraint ids")
    current = state.setdefault("current_step", None)
    if current is not None and current not in seen:
        raise BadStateError(f"current_step {current!r} is not a step of the task")
    state.setdefault("status", "active")
    state.setdefault("env", {})
    state.setdefault("usage", {})
    summary = state.get("summary")
    if isinstance(summary, str):
        summary = {"text": summary}
    if not isinstance(summary, dict):
        summary = {"text": ""}
    summary["authoritative"] = False  # never used to decide anything on resume
    state["summary"] = summary
    state["todo"] = [s["id"] for s in steps if s["status"] in ("pending", "in_progress", "failed")]
    state["done"] = [s["id"] for s in steps if s["status"] == "done"]
    return state


def check_update(old: Mapping[str, JSON], new: Mapping[str, JSON]) -> None:
    """Refuse updates that delete or reword a step or drop a constraint."""
    if new.get("task") != old.get("task"):
        raise BadStateError(f"a state update cannot rename task {old.get('task')!r}")
    new_steps = {s["id"]: s for s in _steps(new)}
    for step in _steps(old):
        sid = step["id"]
        if sid not in new_steps:
            raise BadStateError(
                f"state update deletes step {sid!r}; steps are never deleted",
                hint="mark it skipped instead",
            )
        if new_steps[sid].get("title") != step.get("title"):
            raise BadStateError(
                f"state update rewords step {sid!r}; step titles never change",
                hint="add a new step instead",
            )
    old_c = cast(list[str], old.get("constraints") or [])
    new_c = cast(list[str], new.get("constraints") or [])
    missing = [c for c in old_c if c not in new_c]
    if missing:
        raise BadStateError(
            f"state update drops constraint {missing[0]!r}; constraints are never removed"
        )


def check_external_patch(old: Mapping[str, JSON], patch: Mapping[str, JSON]) -> None:
    """Refuse a patch from outside (`create --state`) that claims what only the tool decides.

    Every status it sets is a move of the state machine that a patch may make
    (`lifecycle.py`: skip a step, give a task up or revive it). A step is done only
    when its step-end checkpoint commits (`step done`), and stays done until `step
    start --redo` or a rollback; a task becomes `recovering` only by resume and leaves
    it only by confirm (design section 1).
    """
    steps = patch.get("steps")
    for item in steps if isinstance(steps, list) else []:
        if not isinstance(item, dict) or "status" not in item:
            continue
        sid = item.get("id")
        before = find_step(old, sid) if isinstance(sid, str) else None
        was = str(before.get("status")) if before is not None else "pending"
        if item["status"] != was and patch_move(STEP_MOVES, was, str(item["status"])) is None:
            raise MoveRefused(
                f"a state patch cannot move step {sid!r} from {was} to {item['status']}",
                hint=_patch_hint(str(old.get("task")), sid, str(item["status"])),
            )
    if "worktree" in patch or "recovery" in patch:
        raise BadStateError(
            "a state patch cannot set 'worktree' or 'recovery': the tool records them"
        )
    status = patch.get("status")
    was = str(old.get("status"))
    if status is not None and status != was and patch_move(TASK_MOVES, was, str(status)) is None:
        raise MoveRefused(
            f"a state patch cannot move the task from {was} to {status}",
            hint="a task is done when its last step is done; recovering is set by resume "
            "and left by confirm; a patch may only give an active task up (failed) or "
            "revive a failed one (active)",
        )


def _patch_hint(task: str, step: JSON, target: str) -> str:
    if target == "done":
        return f"run `git ckpt step done {task} {step}`: its checkpoint is what makes a step done"
    return (
        "a patch may only skip a pending or failed step; a done step stays done until a "
        "redo or a rollback reopens it"
    )


def merge_update(old: Mapping[str, JSON], patch: Mapping[str, JSON]) -> dict[str, JSON]:
    """Apply a state patch: top-level keys replace, `steps` merge by id, `constraints` union."""
    new = json.loads(json.dumps(old))
    for key, value in patch.items():
        if key == "v":
            continue
        if key == "steps" and isinstance(value, list):
            by_id = {s["id"]: s for s in _steps(new)}
            for step in value:
                if not isinstance(step, dict) or "id" not in step:
                    raise BadStateError("every step in a state update needs an 'id'")
                if step["id"] in by_id:
                    by_id[step["id"]].update(step)
                else:
                    new["steps"].append(dict(step))
        elif key == "constraints" and isinstance(value, list):
            new["constraints"] = list(new.get("constraints") or []) + [
                c for c in value if c not in (new.get("constraints") or [])
            ]
        elif key in ("env", "usage") and isinstance(value, dict):
            new.setdefault(key, {}).update(value)
        else:
            new[key] = value
    new = normalize_state(new)
    check_update(old, new)
    return new


TOOL_ONLY_NAMESPACES = (
    "task",
    "state",
    "step",
    "checkpoint",
    "recovery",
    "workspace",
    "constraint",
    "drift",
    "trigger",
)


def is_tool_only(type_: str) -> bool:
    """Event types that change state or prove the write-ahead order: the tool writes them."""
    return type_.split(".", 1)[0] in TOOL_ONLY_NAMESPACES


STOP_TYPES = ("quota", "rate_limit", "error")


def is_stop_signal(ev: Event) -> bool:
    """An event saying why a session stopped (a quota, a rate limit, an error)."""
    head = ev.type.split(".", 1)[0]
    if head in STOP_TYPES or ev.type.endswith((".error", ".quota", ".rate_limit")):
        return True
    return isinstance(ev.data.get("error"), str | dict) and not is_tool_only(ev.type)


def check_external_event_type(type_: str) -> None:
    """Refuse, from `git ckpt event` and the API, a type only the tool may write."""
    check_event_type(type_)
    if is_tool_only(type_):
        raise BadStateError(
            f"event type {type_!r} is written by git ckpt itself",
            hint="use `git ckpt task|step|create|resume` for that, or log your own type "
            "(e.g. tool.call, model.call, file.write, user.prompt)",
        )


def apply_event(
    state: dict[str, JSON] | None, event: Event | NewEvent
) -> dict[str, JSON] | None:
    """Replay one state-changing event logged after the latest checkpoint.

    Raises a CkptError for an event the state cannot take (a second `task.start`, a
    move the state machine does not allow from the current status, a patch that drops
    a constraint, an unknown step); the caller reports and skips it. Other types
    change nothing.
    """
    if event.type not in STATE_EVENTS:
        return state
    if event.type == "task.start":
        started = event.data.get("state")
        if state is not None:
            raise BadStateError("a task.start after the task started would replace its state")
        if not isinstance(started, dict):
            raise BadStateError("a task.start without a state object")
        return normalize_state(json.loads(json.dumps(started)))
    if state is None:
        return None
    if event.type == "state.update":
        return _apply_update(state, event.data)
    step_id = event.links.get("step")
    step = find_step(state, step_id) if isinstance(step_id, str) else None
    if step is None:
        raise BadStateError(f"{event.type} of a step the task does not have: {step_id!r}")
    now = str(step["status"])
    if event.type == "step.start":
        name = "redo" if event.data.get("redo") else START_MOVES.get(now, "start")
        step_move(str(step_id), now, name)
        step["status"] = "in_progress"
        state["current_step"] = step_id
        if state.get("status") == "done":  # a redo reopens a finished task
            state["status"] = "active"
    elif event.data.get("status") == "failed":
        step_move(str(step_id), now, "fail")
        # "done" only counts once its checkpoint commits; a logged failure counts at once
        step["status"] = "failed"
        step["outputs"] = event.data.get("outputs")
    else:
        step_move(str(step_id), now, "done")  # counts when its checkpoint commits
    return normalize_state(state)


def _apply_update(state: dict[str, JSON], data: Mapping[str, JSON]) -> dict[str, JSON]:
    """A `state.update`: an agent's patch (its moves checked as `create --state` checks
    them), or a move of the tool's or a person's (`move`: block, confirm) to its target."""
    patch = data.get("patch")
    if not isinstance(patch, dict):
        raise BadStateError("a state.update without a patch object")
    move = data.get("move")
    if move is None:
        check_external_patch(state, patch)
        return merge_update(state, patch)
    if move not in TOOL_UPDATES:
        raise BadStateError(f"a state.update with an unknown move {move!r}")
    made = task_move(str(state.get("task")), str(state.get("status")), str(move))
    if patch.get("status") != made.target:
        raise BadStateError(f"a state.update {move} that does not set status {made.target}")
    new = merge_update({k: v for k, v in state.items() if k != "recovery"}, patch)
    if "recovery" not in patch and isinstance(state.get("recovery"), dict):
        new["recovery"] = state["recovery"]
    return new
