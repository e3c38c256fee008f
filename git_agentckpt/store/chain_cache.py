"""A task's checkpoint chain, kept per worktree in `.git/agent/state/<task>.chain`.

Locating the start of a resume needs every checkpoint of the task (which ones are
committed, their triggers and steps); walking and parsing 500 checkpoint commits
costs ~20 ms. Checkpoint commits never change, so the parsed chain is kept for one
tip of the task's checkpoint ref. Like the state cache (`state_cache.py`) it is
never trusted over the refs: every read compares its tip with the ref; when the
ref only moved forward, the walk stops at the cached tip and the new checkpoints
go in front; a ref moved back or rewritten, or a damaged, edited or foreign file,
walks the whole chain again. A walk that met a damaged checkpoint (one the store
reports and skips) is not kept, so the warning is given on every read.
"""

from __future__ import annotations

import itertools
import json

from git_agentckpt.model import JSON
from git_agentckpt.sealed import read_sealed, write_sealed
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state_cache import (
    StateCache,
    remember,
    task_of_file,
)

_FIELDS = (
    "id",
    "commit",
    "task",
    "number",
    "kind",
    "trigger",
    "step",
    "baseline",
    "head",
    "subject",
    "time",
    "tree",
    "parent",
)


def _path(store: CheckpointStore, task: TaskName) -> str:
    return StateCache(store.repo.git_dir).path(task.name, ".chain")


_TEXT = frozenset(("id", "commit", "task", "kind", "trigger", "subject", "tree"))
_OPTIONAL = frozenset(("step", "baseline", "head", "parent"))


_TASK_AT = _FIELDS.index("task")


def _kinds(name: str) -> tuple[type, ...]:
    if name in _TEXT:
        return (str,)
    if name in _OPTIONAL:
        return (str, type(None))
    return (int,)  # number, time: `type(v) is int` (a bool is not one)


# every allowed sequence of value types of a row (optional fields: text or null)
_ROW_TYPES = frozenset(itertools.product(*(_kinds(name) for name in _FIELDS)))


def _from_row(row: object, task: str) -> Checkpoint | None:
    """A checkpoint from its row (the values of `_FIELDS`, in order), each value checked
    for its kind in one lookup (a resume of a long task reads 500 rows in every process:
    ~0.7 µs each)."""
    if type(row) is not list or len(row) != len(_FIELDS) or row[_TASK_AT] != task:
        return None
    if tuple(map(type, row)) not in _ROW_TYPES:
        return None
    ckpt = Checkpoint.__new__(Checkpoint)  # frozen: fields set as its __init__ would
    ckpt.__dict__.update(zip(_FIELDS, row, strict=True))
    return ckpt


def _head(tip: str) -> str:
    """The file up to its rows: `{"tip":…,"fields":[…],"rows":[` (the rows run to `]}`)."""
    doc = json.dumps(
        {"tip": tip, "fields": list(_FIELDS)}, ensure_ascii=True, separators=(",", ":")
    )
    return doc[:-1] + ',"rows":['


def _row(ckpt: Checkpoint) -> list[JSON]:
    values = ckpt.to_json()
    return [values[k] for k in _FIELDS]


def _row_text(ckpt: Checkpoint) -> str:
    return json.dumps(_row(ckpt), ensure_ascii=True, separators=(",", ":"))


def _read_doc(path: str, keys: set[str]) -> tuple[str, dict[str, JSON], str] | None:
    """A cache file this module wrote, with exactly `keys`, a tip and today's fields:
    (tip, the document, its text)."""
    raw = read_sealed(path)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) != keys or doc["fields"] != list(_FIELDS):
        return None
    tip = doc["tip"]
    return (tip, doc, raw) if isinstance(tip, str) else None


def _load(path: str, task: TaskName | None) -> tuple[str, list[Checkpoint], str] | None:
    """The cached tip, its chain (newest first) and the rows as the file holds them
    (`task` None: the task of its rows, when the file's name is made from it)."""
    read = _read_doc(path, {"tip", "fields", "rows"})
    if read is None:
        return None
    tip, doc, raw = read
    rows = doc["rows"]
    if not isinstance(rows, list):
        return None
    head = _head(tip)
    if not raw.startswith(head) or not raw.endswith("]}"):
        return None
    if task is None:  # the task of its first row (each row is checked for it below)
        first = rows[0] if rows else None
        name = first[_TASK_AT] if type(first) is list and len(first) == len(_FIELDS) else None
        task = task_of_file(name, path, ".chain")
        if task is None:
            return None
    chain = [_from_row(row, task.name) for row in rows]
    if any(c is None for c in chain):
        return None
    return tip, [c for c in chain if c is not None], raw[len(head) : -2]


# In-process copy of the last chain read or written per file (a long-lived process:
# the MCP server, a harness calling the API); its tip is still compared with the ref.
_memo: dict[str, tuple[str, list[Checkpoint], str]] = {}


def preload(path: str) -> bool:
    """Read the chain file `path` into this process's memo (the daemon, between calls:
    `store/warm_caches.py`); whether it read back whole. Its tip is still compared
    with the ref by whoever reads it."""
    cached = _load(path, None)
    if cached is not None:
        remember(_memo, path, cached)
    return cached is not None


def cached_chain(store: CheckpointStore, task: TaskName) -> list[Checkpoint]:
    """`list(store.chain(task))`, newest first, without walking what was walked before;
    the file is written again with the new rows put in front of the stored text."""
    tip = store.repo.read_ref(task.checkpoints_ref)
    if not tip:
        return list(store.chain(task))
    path = _path(store, task)
    cached = _memo.get(path) or _load(path, task)  # a stale copy is extended like a file
    if cached is not None and cached[0] == tip:
        remember(_memo, path, cached)
        return list(cached[1])
    warned = len(store.warnings)
    fresh: list[Checkpoint] = []
    reached = False
    for ckpt in store.chain(task):
        if cached is not None and ckpt.commit == cached[0]:
            reached = True
            break
        fresh.append(ckpt)
    texts = [_row_text(c) for c in fresh]
    if cached is not None and reached:  # the stored rows go on as the file holds them
        fresh += cached[1]
        texts += [cached[2]] if cached[2] else []
    if len(store.warnings) == warned and fresh and fresh[0].commit == tip:
        body = ",".join(texts)
        write_sealed(path, _head(tip) + body + "]}")
        remember(_memo, path, (tip, list(fresh), body))
    return fresh


def _load_full(path: str, task: TaskName) -> tuple[str, Checkpoint | None] | None:
    read = _read_doc(path, {"tip", "fields", "full"})
    if read is None:
        return None
    tip, doc, _ = read
    row = doc["full"]
    full = None if row is None else _from_row(row, task.name)
    if row is not None and full is None:
        return None
    return tip, full


def last_full(store: CheckpointStore, task: TaskName) -> Checkpoint | None:
    """The newest full checkpoint of the task, kept per tip in `<task>.full` (`tick` asks
    it at every call: after 500 light checkpoints, a walk costs ~8 ms). When the ref
    only moved forward, the walk stops at the cached tip; otherwise, as for the chain."""
    tip = store.repo.read_ref(task.checkpoints_ref)
    if not tip:
        return None
    path = StateCache(store.repo.git_dir).path(task.name, ".full")
    cached = _load_full(path, task)
    if cached is not None and cached[0] == tip:
        return cached[1]
    warned = len(store.warnings)
    found: Checkpoint | None = None
    first: str | None = None
    for ckpt in store.chain(task):
        first = first or ckpt.commit
        if cached is not None and ckpt.commit == cached[0]:
            found = cached[1]
            break
        if ckpt.kind == "full":
            found = ckpt
            break
    if len(store.warnings) == warned and first == tip:
        doc = {"tip": tip, "fields": list(_FIELDS), "full": None if found is None else _row(found)}
        write_sealed(path, json.dumps(doc, ensure_ascii=True, separators=(",", ":")))
    return found
