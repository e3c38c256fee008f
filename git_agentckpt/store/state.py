"""The current task state: the latest checkpoint's note plus the events logged after it."""

from __future__ import annotations

from git_agentckpt.model import JSON, Event, apply_event
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.refs import TaskName


def events_since_tip(log: EventLog, task: TaskName, tip: Checkpoint | None) -> list[Event]:
    """Events appended after the tip's `checkpoint.prepare` (all events if there is no tip)."""
    after: list[Event] = []
    for ev in log.iter_back(task):
        if (
            tip is not None
            and ev.type == "checkpoint.prepare"
            and ev.links.get("checkpoint") == tip.commit
        ):
            break
        after.append(ev)
    after.reverse()
    return after


def current_state(
    store: CheckpointStore, log: EventLog, task: TaskName
) -> tuple[dict[str, JSON] | None, Checkpoint | None]:
    tip = store.tip(task)
    state = store.state_note(tip.commit) if tip is not None else None
    replay = events_since_tip(log, task, tip if state is not None else None)
    for ev in replay:
        state = apply_event(state, ev)
    return state, tip
