"""The current task state: the latest checkpoint's note plus the events logged after it.

Replay never dies on one bad event: an event the state cannot take (a forged
`task.start`, a patch that marks a step done, a step the task does not have)
is skipped and reported, and the rest of the log still counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from git_agentckpt.errors import CkptError
from git_agentckpt.model import JSON, STATE_EVENTS, Event, apply_event
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.events import EventLog, events_of
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state_cache import CachedState, StateCache, StateKey


@dataclass(frozen=True)
class SkippedEvent:
    """A state-changing event that replay refused."""

    id: str
    seq: int
    type: str
    reason: str

    def to_json(self) -> dict[str, JSON]:
        return {"id": self.id, "seq": self.seq, "type": self.type, "reason": self.reason}

    def one_line(self) -> str:
        return f"event #{self.seq} ({self.type}, {self.id}) skipped: {self.reason}"


@dataclass
class TaskView:
    """The current state of a task, and what it was computed from: the checkpoint `tip`
    and the log tip `head` (a write that expects them: `Workspace.create`, `log_move`)."""

    state: dict[str, JSON] | None
    tip: Checkpoint | None
    skipped: list[SkippedEvent] = field(default_factory=list)
    head: str | None = None


# A commit holding a state-changing event has one of these in its message (the type's
# value and its closing quote: whatever the spacing of the writer's JSON).
_STATE_MARKS = tuple(f'{t}"' for t in STATE_EVENTS)


def events_since_tip(
    log: EventLog,
    task: TaskName,
    tip: Checkpoint | None,
    *,
    head: str | None = None,
    stop: str | None = None,
) -> list[Event]:
    """The state-changing events appended after the tip's `checkpoint.prepare` (all of
    them when there is no tip), oldest first.

    Only the commits whose message can hold one (or the tip's prepare) are parsed: a
    `tool.call` changes no state, and with 20,000 of them since the last checkpoint
    parsing them all was most of the cost of every command that reads the state.
    `head`: the log tip to walk back from (default: the ref). `stop`: a commit of the log
    whose events the caller already has (the cached state's log tip): the walk ends
    before it (`_since` also says whether it got there)."""
    return _since(log, task, tip, head, stop)[0]


def _since(
    log: EventLog, task: TaskName, tip: Checkpoint | None, head: str | None, stop: str | None
) -> tuple[list[Event], bool]:
    after: list[Event] = []
    if head is None:
        head = log.repo.read_ref(task.events_ref)
    for info in log.repo.walk(head) if head else ():
        if info.id == stop:
            after.reverse()
            return after, True
        at_tip = tip is not None and tip.commit in info.message
        if not at_tip and not any(mark in info.message for mark in _STATE_MARKS):
            continue
        for ev in reversed(events_of(info)):
            if (
                at_tip
                and ev.type == "checkpoint.prepare"
                and ev.links.get("checkpoint") == (tip.commit if tip else None)
            ):
                after.reverse()
                return after, False
            if ev.type in STATE_EVENTS:
                after.append(ev)
    after.reverse()
    return after, False


def replay(
    state: dict[str, JSON] | None, events: list[Event]
) -> tuple[dict[str, JSON] | None, list[SkippedEvent]]:
    """Apply the state-changing events in order; report and skip the ones that do not fit."""
    skipped: list[SkippedEvent] = []
    for ev in events:
        if ev.type not in STATE_EVENTS:
            continue
        try:
            state = apply_event(state, ev)
        except CkptError as exc:
            skipped.append(SkippedEvent(ev.id, ev.seq, ev.type, exc.one_line()))
    return state, skipped


def read_task(store: CheckpointStore, log: EventLog, task: TaskName) -> TaskView:
    """The current state: from the cache when the refs still name what it was computed
    from (store/state_cache.py), else from the tip's note and the events after it."""
    # The tip (and its note) before the log: a checkpoint's prepare is logged before its
    # ref moves, so the log read after a tip always holds that tip's prepare. (The log
    # first could pair an old log with a newer tip, and replay events the note holds.)
    tip = store.tip(task)
    note = store.state_note_id(tip.commit) if tip is not None else None
    head = log.repo.read_ref(task.events_ref)
    key = StateKey(head, tip.commit if tip is not None else None, note)
    cache = StateCache(log.repo.git_dir)
    cached = cache.load(task.name)
    if cached is not None and cached.key == key:
        return TaskView(cached.state, tip, [_skipped(s) for s in cached.skipped], head)
    extends = (
        cached is not None
        and cached.key.events is not None
        and (cached.key.tip, cached.key.note) == (key.tip, key.note)
    )
    events, reached = _since(
        log,
        task,
        tip if note is not None else None,
        head,
        cached.key.events if cached is not None and extends else None,
    )
    if reached and cached is not None:  # the log only grew since: replay what is new
        state, skipped = cached.state, [_skipped(s) for s in cached.skipped]
    else:
        state = store.state_note_at(note, key.tip or "") if note is not None else None
        skipped = []
    state, more = replay(state, events)
    skipped += more
    cache.save(task.name, CachedState(key, state, [s.to_json() for s in skipped]))
    return TaskView(state, tip, skipped, head)


def _skipped(obj: dict[str, JSON]) -> SkippedEvent:
    return SkippedEvent(str(obj["id"]), int(obj["seq"]), str(obj["type"]), str(obj["reason"]))


def current_state(
    store: CheckpointStore, log: EventLog, task: TaskName
) -> tuple[dict[str, JSON] | None, Checkpoint | None]:
    view = read_task(store, log, task)
    return view.state, view.tip
