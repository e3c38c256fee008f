"""A per-worktree cache of task states: `.git/agent/state/<task>.json`, never pushed.

The current state of a task (store/state.py) is a pure function of three object ids:
the event log's tip, the checkpoint ref's tip and the blob of that checkpoint's state
note. Objects never change under their ids, so a state computed for one such key is the
state for that key for ever. The cache holds the last state computed with its key; a
read takes the three ids from the refs (always: the cache is never trusted over them)
and uses the cached state only when all three are equal. When only the log moved on
(new events, events a fetch merged in), the walk back from the new tip stops at the
cached tip and replays just what came after it; anything else (a new checkpoint, a
rewritten note, a log rewound or replaced) computes the state from the note again.

A file that is missing, truncated, garbled, not sealed with the user's key (edited
by hand and sealed again: `sealed.py`), from another format or of another task is
ignored and rewritten. Files are written to a temporary name and renamed into place,
so concurrent writers leave one whole file or the other. A repository whose git dir
cannot be written (read-only) simply runs without the cache.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from git_agentckpt.errors import CkptError
from git_agentckpt.model import JSON
from git_agentckpt.sealed import read_sealed, write_sealed
from git_agentckpt.store.refs import TaskName

_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


@dataclass(frozen=True)
class StateKey:
    """What the state is a function of: the log tip, the checkpoint tip, its note blob."""

    events: str | None
    tip: str | None
    note: str | None

    def to_json(self) -> dict[str, JSON]:
        return {"events": self.events, "tip": self.tip, "note": self.note}

    @classmethod
    def from_json(cls, obj: Any) -> StateKey | None:
        if not isinstance(obj, dict):
            return None
        values = [obj.get("events"), obj.get("tip"), obj.get("note")]
        if not all(v is None or (isinstance(v, str) and _OID.match(v)) for v in values):
            return None
        return cls(*values)


@dataclass(frozen=True)
class CachedState:
    key: StateKey
    state: dict[str, JSON] | None
    skipped: list[dict[str, JSON]]  # SkippedEvent.to_json() of each refused event


def _valid_skipped(items: Any) -> bool:
    return isinstance(items, list) and all(
        isinstance(s, dict)
        and isinstance(s.get("id"), str)
        and isinstance(s.get("seq"), int)
        and isinstance(s.get("type"), str)
        and isinstance(s.get("reason"), str)
        for s in items
    )


def _parse(payload: str, task: str) -> CachedState | None:
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("task") != task:
        return None
    key = StateKey.from_json(obj.get("key"))
    state, skipped = obj.get("state"), obj.get("skipped")
    if key is None or not (state is None or isinstance(state, dict)):
        return None
    if not _valid_skipped(skipped):
        return None
    return CachedState(key, state, list(skipped or []))


class StateCache:
    """The cached states of one worktree (its git dir's `agent/state/`)."""

    def __init__(self, git_dir: str) -> None:
        self.git_dir = git_dir
        self.dir = os.path.join(git_dir, "agent", "state")

    def path(self, task: str, kind: str = ".json") -> str:
        """The file of `task`'s cached state, or (`kind` ".idx", ".chain") of another
        cache of the task kept beside it."""
        return os.path.join(self.dir, file_name(task, kind))

    def load(self, task: str) -> CachedState | None:
        """The cached state of `task`, or None when there is none that reads back whole
        (the caller still compares its key with the refs)."""
        raw = self._read(task)
        return None if raw is None else _parse(raw, task)

    def _read(self, task: str) -> str | None:
        return read_sealed(self.path(task))

    def save(self, task: str, cached: CachedState) -> None:
        """Write the file atomically (temporary name + rename); errors are ignored: the
        cache only saves work, the refs are the truth."""
        payload = json.dumps(
            {
                "task": task,
                "key": cached.key.to_json(),
                "state": cached.state,
                "skipped": cached.skipped,
            },
            ensure_ascii=True,
            separators=(",", ":"),
            sort_keys=True,
        )
        write_sealed(self.path(task), payload)


def file_name(task: str, kind: str) -> str:
    """The name of `task`'s cache file of `kind` (".json", ".idx", ".chain")."""
    import hashlib  # not at start-up (a command that reads no state needs none)

    digest = hashlib.sha256(task.encode("utf-8", "surrogateescape")).hexdigest()
    return digest[:32] + kind


def task_of_file(name: object, path: str, kind: str) -> TaskName | None:
    """The task `name` a cache file read for its own sake (`warm_caches.py`) says it
    holds, when it is a task name and the file's name is made from it; else None."""
    if not isinstance(name, str) or os.path.basename(path) != file_name(name, kind):
        return None
    try:
        return TaskName(name)
    except CkptError:
        return None


MEMO_FILES = 32  # cache files a process keeps in memory (a long-lived one reads many)

V = TypeVar("V")


def remember(memo: dict[str, V], path: str, value: V) -> None:
    """Keep `value`, read from or written to the cache file `path`, in a process's
    `memo`, which holds the last `MEMO_FILES` files (its tip is still compared with the
    ref by whoever reads it)."""
    if len(memo) >= MEMO_FILES and path not in memo:
        memo.pop(next(iter(memo)))
    memo[path] = value
