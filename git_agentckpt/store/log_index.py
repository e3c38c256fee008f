"""The key events of a task's log, kept per worktree in `.git/agent/state/<task>.idx`.

Resume, `confirm` and locate need the events the tool itself writes (checkpoint,
step, recovery, state events: `model.is_tool_only`) and the stop signals (a quota, a
rate limit, an error), in log order; they never need the thousands of `tool.call`s
between them. The index holds exactly those events for one log tip. Like the state
cache (store/state_cache.py) it is never trusted over the refs: a read compares its
tip with the ref, and when the log only grew it walks back from the new tip to the
indexed one and appends what is new; a rewound or replaced log, a damaged or edited
file, builds it again from the whole log. It is the same list a full read filtered by
`is_key_event` gives, in the same order (tests/test_log_stream.py checks it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from git_agentckpt.model import Event, is_stop_signal, is_tool_only
from git_agentckpt.sealed import read_sealed, write_sealed
from git_agentckpt.store.events import EventLog, events_of
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state_cache import (
    StateCache,
    remember,
    task_of_file,
)


def is_key_event(ev: Event) -> bool:
    return is_tool_only(ev.type) or is_stop_signal(ev)


def _path(log: EventLog, task: TaskName) -> str:
    return StateCache(log.repo.git_dir).path(task.name, ".idx")


CALL_TYPES = ("tool.call", "model.call")  # what `tick` counts (tick.py)


@dataclass(frozen=True)
class Index:
    """The key events of a log tip, oldest first; `calls_before[i]`: how many tool and
    model calls the log holds before `events[i]`; `calls`: how many in all; `body`: the
    events as the file holds them (JSON objects joined by commas, ASCII), so a grown log
    appends to it instead of encoding every event again."""

    tip: str
    body: str
    events: list[Event]
    calls_before: list[int]
    calls: int
    own: list[Event]  # the agent's own last `OWN_KEPT` events (not the tool's), oldest first
    last_stop: int = -1  # where in `events` the last stop signal is (-1: none)

    @property
    def stop(self) -> Event | None:
        """The last stop signal of the log (`is_stop_signal`), or None."""
        return self.events[self.last_stop] if self.last_stop >= 0 else None


_EVENTS_KEY = ',"events":['  # last in the file: the body runs from here to the end
OWN_KEPT = 32  # the brief shows the last 10 (recovery/flow.py)


def _payload(task: TaskName, index: Index) -> str:
    """The file: one JSON object, the events last (`_EVENTS_KEY`), parsed in one go."""
    head = json.dumps(
        {"kind": "index", "v": 4, "task": task.name, "tip": index.tip, "stop": index.last_stop},
        ensure_ascii=True,
        separators=(",", ":"),
    )[:-1]
    before = json.dumps(index.calls_before, separators=(",", ":"))
    own = ",".join(_line(ev) for ev in index.own)
    return (
        f'{head},"before":{before},"calls":{index.calls},"own":[{own}]{_EVENTS_KEY}{index.body}]}}'
    )


def _load(path: str, task: TaskName | None) -> Index | None:
    """The index in the file `path`, if it reads back whole and is `task`'s (None: the
    task it names, when the file is `path`: `preload`)."""
    raw = read_sealed(path)
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "index" or obj.get("v") != 4:
        return None
    if task is None:
        task = task_of_file(obj.get("task"), path, ".idx")
        if task is None:
            return None
    tip, objs, before, calls, stop = (
        obj.get("tip"),
        obj.get("events"),
        obj.get("before"),
        obj.get("calls"),
        obj.get("stop"),
    )
    if obj.get("task") != task.name or not isinstance(tip, str):
        return None
    if not isinstance(objs, list) or not isinstance(before, list) or len(before) != len(objs):
        return None
    if not isinstance(calls, int) or not all(isinstance(n, int) for n in before):
        return None
    if type(stop) is not int or not -1 <= stop < len(objs):
        return None
    events = _parse(objs)
    own_objs = obj.get("own")
    own = _parse(own_objs) if isinstance(own_objs, list) else None
    start = raw.find(_EVENTS_KEY)
    if events is None or own is None or start < 0:
        return None
    if stop >= 0 and not is_stop_signal(events[stop]):
        return None
    index = Index(tip, raw[start + len(_EVENTS_KEY) : -2], events, before, calls, own, stop)
    return index if _payload(task, index) == raw else None  # the body is exactly that


def preload(path: str) -> bool:
    """Read the index file `path` into this process's memo (the daemon, between calls:
    each child it forks starts with it, `store/warm_caches.py`); whether it read back
    whole. Whoever reads it still compares its tip with the ref."""
    index = _load(path, None)
    if index is not None:
        remember(_memo, path, index)
    return index is not None


def _parse(objs: list[object]) -> list[Event] | None:
    """Events from the cache's records (written by `_line` from checked events; the
    file's digest shows it is whole): the fields code compares and indexes are checked
    for their kind, the rest taken as stored."""
    kinds = (str, int, str, str, str, dict, dict, dict)
    events: list[Event] = []
    try:
        for o in objs:
            ev = Event.from_cache(o)  # type: ignore[arg-type]
            values = (ev.id, ev.seq, ev.ts, ev.task, ev.type, ev.actor, ev.links, ev.data)
            if not all(type(v) is k for v, k in zip(values, kinds, strict=True)):
                return None
            events.append(ev)
    except (KeyError, TypeError, AttributeError):  # not events: rebuilt
        return None
    return events


def _line(ev: Event) -> str:
    return json.dumps(ev.to_json(), ensure_ascii=True, sort_keys=True, separators=(",", ":"))


# In-process copy of the last index read or written per file; its tip is still
# compared with the ref on every call.
_memo: dict[str, Index] = {}
# Inside `writes_deferred`: the files to write when it ends, with what they hold then
_dirty: dict[str, tuple[TaskName, Index]] = {}
_deferring = 0


@contextlib.contextmanager
def writes_deferred() -> Iterator[None]:
    """One command reads the index several times while it appends events (a resume:
    three times): inside, each file is written once, when the outermost block ends,
    not at every read. A process killed first leaves the older file, which the next
    read extends (a cache only saves work)."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring:
            while _dirty:
                path, (task, index) = _dirty.popitem()
                write_sealed(path, _payload(task, index))


def last_stop_signal(log: EventLog, task: TaskName) -> Event | None:
    """The last stop signal in the task's log (`is_stop_signal`), kept by the index."""
    index = read_index(log, task)
    return None if index is None else index.stop


def key_events(log: EventLog, task: TaskName) -> list[Event]:
    """The task's key events (`is_key_event`), oldest first."""
    index = read_index(log, task)
    return [] if index is None else list(index.events)


def read_index(log: EventLog, task: TaskName) -> Index | None:
    """The index of the log's tip (None: no log): from the file when its tip is the
    ref's, extended when the log only grew since, else built from the whole log."""
    head = log.repo.read_ref(task.events_ref)
    if head is None:
        return None
    path = _path(log, task)
    cached = _memo.get(path)  # extended in place when the log grew since (resume appends)
    if cached is None:
        cached = _load(path, task)
    if cached is None or cached.tip != head:
        cached = _extend(log, head, cached)
        if _deferring:
            _dirty[path] = (task, cached)
        else:
            write_sealed(path, _payload(task, cached))
    remember(_memo, path, cached)
    return cached


def _extend(log: EventLog, head: str, old: Index | None) -> Index:
    """The index of `head`: `old`'s plus the commits after it when `old.tip` is on
    `head`'s first-parent chain, else built from the whole log."""
    segment: list[Event] = []  # newest first
    reached = False
    for info in log.repo.walk(head):
        if old is not None and info.id == old.tip:
            reached = True
            break
        segment.extend(reversed(events_of(info)))
    segment.reverse()
    base = old if reached and old is not None else Index(head, "", [], [], 0, [])
    lines, events = [base.body] if base.body else [], list(base.events)
    before, calls, stop = list(base.calls_before), base.calls, base.last_stop
    for ev in segment:
        if is_key_event(ev):
            if is_stop_signal(ev):
                stop = len(events)
            events.append(ev)
            lines.append(_line(ev))
            before.append(calls)
        if ev.type in CALL_TYPES:
            calls += 1
    own = [*base.own, *(ev for ev in segment if not is_tool_only(ev.type))][-OWN_KEPT:]
    return Index(head, ",".join(lines), events, before, calls, own, stop)


def last_own_events(log: EventLog, task: TaskName, n: int) -> list[Event]:
    """The agent's own last `n` events (not the tool's), oldest first: from the index for
    up to `OWN_KEPT` (a run of resumes adds only the tool's events, and reading back
    through them grew with every resume), else read back from the tip as far as they go."""
    out: list[Event] = []
    if n <= 0:
        return out
    if n <= OWN_KEPT:
        index = read_index(log, task)
        return [] if index is None else list(index.own[-n:])
    for ev in log.iter_back(task):
        if not is_tool_only(ev.type):
            out.append(ev)
            if len(out) >= n:
                break
    out.reverse()
    return out


__all__ = [
    "CALL_TYPES",
    "Index",
    "is_key_event",
    "key_events",
    "last_own_events",
    "last_stop_signal",
    "preload",
    "read_index",
    "writes_deferred",
]
