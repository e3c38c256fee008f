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

import json
from dataclasses import dataclass

from git_agentckpt.model import Event, dumps, is_stop_signal, is_tool_only
from git_agentckpt.store.events import EventLog, events_of
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state_cache import StateCache, read_sealed, write_sealed


def is_key_event(ev: Event) -> bool:
    return is_tool_only(ev.type) or is_stop_signal(ev)


def _path(log: EventLog, task: TaskName) -> str:
    return StateCache(log.repo.git_dir).path(task.name, ".idx")


CALL_TYPES = ("tool.call", "model.call")  # what `tick` counts (tick.py)


@dataclass(frozen=True)
class Index:
    """The key events of a log tip, oldest first; `calls_before[i]`: how many tool and
    model calls the log holds before `events[i]`; `calls`: how many in all."""

    tip: str
    lines: list[str]
    events: list[Event]
    calls_before: list[int]
    calls: int


def _load(path: str, task: TaskName) -> Index | None:
    raw = read_sealed(path)
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "index" or obj.get("task") != task.name:
        return None
    tip, lines, before, calls = (
        obj.get("tip"),
        obj.get("lines"),
        obj.get("before"),
        obj.get("calls"),
    )
    if not (isinstance(tip, str) and isinstance(lines, list) and isinstance(before, list)):
        return None
    if not isinstance(calls, int) or len(before) != len(lines):
        return None
    if not all(isinstance(x, str) for x in lines) or not all(isinstance(n, int) for n in before):
        return None
    events = _parse(lines)
    return None if events is None else Index(tip, lines, events, before, calls)


def _parse(lines: list[str]) -> list[Event] | None:
    try:
        objs = json.loads("[" + ",".join(lines) + "]")
        return [Event.from_json(o) for o in objs]
    except Exception:  # a file that reads back whole but is not events: rebuilt
        return None


# In-process copy of the last index read or written per file; its tip is still
# compared with the ref on every call.
_memo: dict[str, Index] = {}


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
        payload = {
            "kind": "index",
            "task": task.name,
            "tip": head,
            "lines": cached.lines,
            "before": cached.calls_before,
            "calls": cached.calls,
        }
        write_sealed(path, json.dumps(payload, ensure_ascii=True, separators=(",", ":")))
    if len(_memo) >= 32 and path not in _memo:  # a long-lived process that reads many logs
        _memo.pop(next(iter(_memo)))
    _memo[path] = cached
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
    base = old if reached and old is not None else Index(head, [], [], [], 0)
    lines, events = list(base.lines), list(base.events)
    before, calls = list(base.calls_before), base.calls
    for ev in segment:
        if is_key_event(ev):
            events.append(ev)
            lines.append(dumps(ev.to_json()))
            before.append(calls)
        if ev.type in CALL_TYPES:
            calls += 1
    return Index(head, lines, events, before, calls)


def last_own_events(log: EventLog, task: TaskName, n: int) -> list[Event]:
    """The agent's own last `n` events (not the tool's), oldest first: read back from the
    tip only as far as they go."""
    out: list[Event] = []
    if n <= 0:
        return out
    for ev in log.iter_back(task):
        if not is_tool_only(ev.type):
            out.append(ev)
            if len(out) >= n:
                break
    out.reverse()
    return out


__all__ = ["CALL_TYPES", "Index", "is_key_event", "key_events", "last_own_events", "read_index"]
