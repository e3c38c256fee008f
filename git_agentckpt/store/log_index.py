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

from git_agentckpt.model import Event, dumps, is_stop_signal, is_tool_only
from git_agentckpt.store.events import EventLog, events_of
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state_cache import StateCache, read_sealed, write_sealed


def is_key_event(ev: Event) -> bool:
    return is_tool_only(ev.type) or is_stop_signal(ev)


def _path(log: EventLog, task: TaskName) -> str:
    return StateCache(log.repo.git_dir).path(task.name)[: -len(".json")] + ".idx"


def _load(path: str, task: TaskName) -> tuple[str, list[str]] | None:
    raw = read_sealed(path)
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "index" or obj.get("task") != task.name:
        return None
    tip, lines = obj.get("tip"), obj.get("lines")
    if not isinstance(tip, str) or not isinstance(lines, list):
        return None
    if not all(isinstance(x, str) for x in lines):
        return None
    return tip, lines


def _parse(lines: list[str]) -> list[Event] | None:
    try:
        objs = json.loads("[" + ",".join(lines) + "]")
        return [Event.from_json(o) for o in objs]
    except Exception:  # a file that reads back whole but is not events: rebuilt
        return None


# In-process copy of the last index read or written per file: (log tip, events). The
# tip is still compared with the ref on every call.
_memo: dict[str, tuple[str, list[str], list[Event]]] = {}


def key_events(log: EventLog, task: TaskName) -> list[Event]:
    """The task's key events (`is_key_event`), oldest first."""
    head = log.repo.read_ref(task.events_ref)
    if head is None:
        return []
    path = _path(log, task)
    memo = _memo.get(path)
    if memo is not None and memo[0] == head:
        return list(memo[2])
    cached = _load(path, task)
    old = _parse(cached[1]) if cached is not None else None
    if cached is not None and old is not None and cached[0] == head:
        _memo[path] = (head, cached[1], old)
        return list(old)
    stop = cached[0] if cached is not None and old is not None else None
    new: list[Event] = []
    reached = False
    for info in log.repo.walk(head):
        if info.id == stop:
            reached = True
            break
        new.extend(ev for ev in reversed(events_of(info)) if is_key_event(ev))
    new.reverse()
    lines = [dumps(e.to_json()) for e in new]
    if reached and cached is not None and old is not None:
        lines, new = [*cached[1], *lines], [*old, *new]
    payload = {"kind": "index", "task": task.name, "tip": head, "lines": lines}
    write_sealed(path, json.dumps(payload, ensure_ascii=True, separators=(",", ":")))
    if len(_memo) >= 32:  # a long-lived process that reads many logs
        _memo.pop(next(iter(_memo)))
    _memo[path] = (head, lines, new)
    return list(new)


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


__all__ = ["is_key_event", "key_events", "last_own_events"]
