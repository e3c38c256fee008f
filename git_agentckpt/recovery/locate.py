"""Resume step 1: locate the starting checkpoint from the event log.

The starting point is the last *complete* checkpoint (its `prepare` logged and
its ref move done). A step is open when its latest `step.start` is not
followed by a committed step-end checkpoint of that step, nor by a committed
resume checkpoint (which resets the step to pending). When a step is open,
the start is the newest committed checkpoint taken before the earliest open
`step.start`: checkpoints from the middle of a step (light ones, the safety
checkpoints of a restore) are never a starting point.

A resume checkpoint (trigger `resume`) stands for the checkpoint it recovered,
so running resume again gives the same starting point. The safety checkpoints of a
restore (trigger `pre_restore`) hold the drift they undid: never a starting point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from git_agentckpt.model import JSON, Event, NewEvent
from git_agentckpt.store.chain_cache import cached_chain
from git_agentckpt.store.checkpoints import (
    RESUME_TRIGGER,
    SAFETY_TRIGGER,
    STEP_END_TRIGGER,
    Checkpoint,
    CheckpointStore,
)
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.log_index import key_events
from git_agentckpt.store.refs import TaskName

__all__ = ["RESUME_TRIGGER", "SAFETY_TRIGGER", "Located", "locate"]


@dataclass
class Located:
    start: Checkpoint | None  # the checkpoint whose tree and note we resume from
    effective: Checkpoint | None  # the checkpoint in the chain (a resume checkpoint or start)
    reason: str
    open_steps: list[str] = field(default_factory=list)
    skipped: list[Checkpoint] = field(default_factory=list)  # committed after an open step began
    rolled_forward: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    mid_step: set[str] = field(default_factory=set)  # commits never usable as a start
    # committed in another clone's chain (their commit event came by fetch): not aborted
    elsewhere: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, JSON]:
        return {
            "start": self.start.to_json() if self.start else None,
            "effective": self.effective.commit if self.effective else None,
            "reason": self.reason,
            "open_steps": self.open_steps,
            "skipped": [c.commit for c in self.skipped],
            "rolled_forward": self.rolled_forward,
            "aborted_checkpoints": self.aborted,
            "committed_elsewhere": self.elsewhere,
        }


def _origin(store: CheckpointStore, ckpt: Checkpoint) -> Checkpoint:
    """A resume checkpoint stands for the checkpoint it recovered."""
    if ckpt.trigger != RESUME_TRIGGER:
        return ckpt
    note = store.state_note(ckpt.commit) or {}
    recovery = note.get("recovery")
    origin = recovery.get("from") if isinstance(recovery, dict) else None
    if isinstance(origin, str):
        try:
            return store.get(origin)
        except Exception:  # a missing origin: the resume checkpoint stands alone
            return ckpt
    return ckpt


_CHECKPOINT_TYPES = frozenset(("checkpoint.prepare", "checkpoint.commit", "checkpoint.abort"))


def _checkpoint_events(events: list[Event]) -> tuple[dict[str, int], set[str], set[str]]:
    """Where each checkpoint's prepare is in the log, and which have a commit or abort."""
    prepared_at: dict[str, int] = {}
    has_commit_event: set[str] = set()
    has_abort: set[str] = set()
    for i, ev in enumerate(events):
        if ev.type not in _CHECKPOINT_TYPES:  # most key events: the type alone rules them out
            continue
        commit = ev.links.get("checkpoint")
        if not isinstance(commit, str):
            continue
        if ev.type == "checkpoint.prepare":
            prepared_at.setdefault(commit, i)
        elif ev.type == "checkpoint.commit":
            has_commit_event.add(commit)
        elif ev.type == "checkpoint.abort":
            has_abort.add(commit)
    return prepared_at, has_commit_event, has_abort


def _open_steps(
    events: list[Event], committed: dict[str, Checkpoint], done_in: Callable[[str], set[str]]
) -> tuple[dict[str, int], set[str]]:
    """Steps started and not finished (where each began), and the checkpoints committed
    in the middle of an open step (never a starting point). A start of a step whose
    step-end checkpoint is committed is a drift signal, not an open step, unless it is
    an explicit redo; `done_in(commit)` tells which steps a resume checkpoint kept done."""
    open_since: dict[str, int] = {}
    mid_step: set[str] = set()
    done: set[str] = set()
    # the steps a resume checkpoint kept done are read from its note only when a later
    # event needs them: a run of resumes with nothing between reads one note, not all
    kept_by: str | None = None
    for i, ev in enumerate(events):
        if ev.type == "step.start":
            step = ev.links.get("step")
            if not isinstance(step, str):
                continue
            if kept_by is not None:
                done, kept_by = done | done_in(kept_by), None
            if step not in done or ev.data.get("redo"):
                done.discard(step)
                open_since.setdefault(step, i)
        elif ev.type == "checkpoint.prepare":
            commit = ev.links.get("checkpoint")
            if not isinstance(commit, str) or commit not in committed:
                continue
            ckpt = committed[commit]
            if ckpt.trigger == RESUME_TRIGGER:
                open_since.clear()
                done, kept_by = set(), commit
            elif ckpt.trigger == STEP_END_TRIGGER and ckpt.step:
                open_since.pop(ckpt.step, None)
                done.add(ckpt.step)
            elif open_since:
                mid_step.add(commit)
    return open_since, mid_step


def _done_in(store: CheckpointStore) -> Callable[[str], set[str]]:
    def done(commit: str) -> set[str]:
        note = store.state_note(commit) or {}
        steps = note.get("steps")
        return (
            {str(s["id"]) for s in steps or [] if isinstance(s, dict) and s.get("status") == "done"}
            if isinstance(steps, list)
            else set()
        )

    return done


def locate(store: CheckpointStore, log: EventLog, task: TaskName, *, roll_forward: bool) -> Located:
    chain = cached_chain(store, task)  # the walk is kept per tip (store/chain_cache.py)
    committed = {c.commit: c for c in chain}
    events: list[Event] = key_events(log, task)  # the tool's own events, indexed

    prepared_at, has_commit_event, has_abort = _checkpoint_events(events)
    rolled = [c for c in prepared_at if c in committed and c not in has_commit_event]
    aborted = [
        c
        for c in prepared_at
        if c not in committed and c not in has_abort and c not in has_commit_event
    ]
    elsewhere = [c for c in prepared_at if c not in committed and c in has_commit_event]
    if roll_forward and rolled:
        data: dict[str, JSON] = {"rolled_forward": True, "by": "resume"}
        log.append(
            task,
            [NewEvent("checkpoint.commit", links={"checkpoint": c}, data=data) for c in rolled],
        )
    open_since, mid_step = _open_steps(events, committed, _done_in(store))

    # positions of committed checkpoints in the log (unlogged ones: oldest)
    def position(c: Checkpoint) -> int:
        return prepared_at.get(c.commit, -1)

    # a restore's safety checkpoint holds the drift it undid: an undo point, never a start
    usable = [c for c in chain if c.commit not in mid_step and c.trigger != SAFETY_TRIGGER]
    if open_since:
        first_open = min(open_since.values())
        before = [c for c in usable if position(c) < first_open]
        skipped = [c for c in chain if position(c) > first_open]
        effective = before[0] if before else None
        opened = sorted(open_since, key=open_since.__getitem__)
        reason = (
            f"step {', '.join(opened)} was started and not finished: resuming from the "
            "checkpoint taken before it began"
        )
    else:
        effective = usable[0] if usable else None
        skipped = []
        reason = "the last complete checkpoint"
    if effective is None:
        return Located(
            None,
            None,
            "no complete checkpoint to resume from",
            list(open_since),
            skipped,
            rolled,
            aborted,
            mid_step,
            elsewhere,
        )
    start = _origin(store, effective)
    if start is not effective:
        reason += f" (a resume checkpoint standing for {start.id})"
    return Located(
        start,
        effective,
        reason,
        sorted(open_since, key=open_since.__getitem__),
        skipped,
        rolled,
        aborted,
        mid_step,
        elsewhere,
    )
