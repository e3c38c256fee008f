"""Big event payloads stored apart (design section 1: "large payloads as blobs
referenced by id").

An agent's `input`, `output` or `data` whose canonical JSON is above `LIMIT` bytes (a
whole tool output, a file dump) is written, already redacted, as a blob; the event
keeps a reference in its place, `{"$payload": {"blob": <id>, "bytes": <size>}}`, and
the blob is an entry of the event commit's tree (named by its id), so it is reachable
from the log: fetch and push carry it, gc keeps it. Reading a log never parses it:
`git ckpt log` shows the reference (text: `[output: 1.2 MiB stored apart]`), and
`log --full` loads it back, only from the tree of the commit that holds the event.
The tool's own events (state, steps, checkpoints) are always inline: replay reads them.
Logs written before this (big payloads inline) read as they always did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from git_agentckpt.errors import CkptError, CorruptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON, NewEvent, dumps, is_tool_only

LIMIT = 64 * 1024
FIELDS = ("input", "output", "data")
MARK = "$payload"
_BLOB_MODE = 0o100644


def payload_ref(value: JSON) -> tuple[str, int] | None:
    """(blob id, size) when `value` is a reference to a payload stored apart."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ref = value.get(MARK)
    if not isinstance(ref, dict):
        return None
    blob, size = ref.get("blob"), ref.get("bytes")
    if isinstance(blob, str) and len(blob) in (40, 64) and isinstance(size, int):
        return blob, size
    return None


def store_apart(repo: GitRepo, events: Sequence[NewEvent]) -> tuple[list[NewEvent], list[str]]:
    """The events with each payload above LIMIT replaced by a reference, and the blobs
    written (the caller makes them entries of the event commit's tree)."""
    out: list[NewEvent] = []
    blobs: list[str] = []
    for ev in events:
        if is_tool_only(ev.type):
            out.append(ev)
            continue
        changes: dict[str, JSON] = {}
        for name in FIELDS:
            value = getattr(ev, name)
            if value is None or value == {}:
                continue
            data = dumps(value).encode("utf-8", "surrogatepass")
            if len(data) > LIMIT:
                blob = repo.write_blob(data)
                blobs.append(blob)
                changes[name] = {MARK: {"blob": blob, "bytes": len(data)}}
        out.append(replace(ev, **changes) if changes else ev)
    return out, blobs


def tree_of(repo: GitRepo, blobs: Sequence[str]) -> str:
    """The tree of an event commit: the empty tree, or the payload blobs by id."""
    if not blobs:
        return repo.empty_tree()
    return repo.write_tree({b: (b, _BLOB_MODE) for b in blobs})


def refs_in(obj: dict[str, JSON]) -> list[str]:
    """The blob ids an event's JSON object refers to."""
    return [r[0] for name in FIELDS if (r := payload_ref(obj.get(name))) is not None]


def load(repo: GitRepo, tree: str, obj: dict[str, JSON]) -> dict[str, JSON]:
    """The event object with its references replaced by the payloads (read from the
    tree of the commit that holds it: an id from anywhere else is not followed)."""
    out = dict(obj)
    for name in FIELDS:
        ref = payload_ref(obj.get(name))
        if ref is None:
            continue
        entry = repo.tree_entry(tree, ref[0]) if tree else None
        if entry is None or entry[0] != ref[0]:
            raise CorruptError(f"the {name} payload {ref[0][:12]} is not in its event commit")
        try:
            out[name] = json.loads(repo.read_blob(ref[0]).decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError, CkptError) as exc:
            raise CorruptError(f"the {name} payload {ref[0][:12]} is damaged") from exc
    return out


def placeholder(obj: dict[str, JSON]) -> str:
    """`[output: 1.2 MiB stored apart]` for each payload stored apart ('' when none)."""
    bits = []
    for name in FIELDS:
        ref = payload_ref(obj.get(name))
        if ref is not None:
            bits.append(f"[{name}: {_size(ref[1])} stored apart]")
    return " ".join(bits)


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / 1024:.0f} KiB"
