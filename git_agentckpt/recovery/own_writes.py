"""The agent's own logged writes since a checkpoint: explained, not drift.

After each call of a file tool, the agent hook logs in its `tool.call` event
`data.files` each path the call wrote in the worktree, with the sha256 of the file's
content right after the call (`null`: the call deleted it; `""`: not hashed).
When an agent is killed in the middle of a turn, its `turn_end` checkpoint never
comes, and everything that turn wrote differs from the last checkpoint. A file whose
last logged write since the checkpoint left exactly what is there now is the agent's
own interrupted work: the resume keeps it (`verify.py`) instead of stopping for a
person. A file changed again after that write, or that no logged call wrote, is drift.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator, Mapping

from git_agentckpt.model import JSON, Event

MAX_HASHED = 64 << 20  # bytes: a larger file is logged unhashed (a hook must stay quick)
MAX_EVENTS = 20_000  # events read back to the checkpoint at most


def digest(path: str) -> str | None:
    """sha256 of a regular file's content; None when it does not exist; "" when it is not
    hashed (too large, not a regular file, unreadable). Opened without following a
    symlink and without waiting (a FIFO put there never blocks a hook)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    with open(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_HASHED:
            return ""
        h = hashlib.sha256()
        try:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        except OSError:
            return ""
    return h.hexdigest()


def _since(events: Iterator[tuple[Event, bool]], commit: str) -> Iterator[Event]:
    """The events logged here after checkpoint `commit`'s prepare, newest first (a merge
    from another clone brought the others: never this worktree's writes)."""
    for n, (ev, merged) in enumerate(events):
        if n >= MAX_EVENTS or (
            ev.type == "checkpoint.prepare" and ev.links.get("checkpoint") == commit
        ):
            return
        if not merged:
            yield ev


def last_writes(events: Iterable[Event], paths: set[str]) -> dict[str, JSON]:
    """For each of `paths` a logged call wrote: the digest its newest such call logged
    (`events` newest first)."""
    out: dict[str, JSON] = {}
    for ev in events:
        files = ev.data.get("files") if ev.type == "tool.call" else None
        if isinstance(files, Mapping):
            for rel, logged in files.items():
                if rel in paths and rel not in out:
                    out[rel] = logged
    return out


def explained(
    events: Iterator[tuple[Event, bool]], commit: str, paths: Iterable[str], workdir: str
) -> set[str]:
    """The paths (relative to the worktree) that the agent's own logged calls since
    checkpoint `commit` left as they are now."""
    wanted = set(paths)
    out = set()
    for rel, logged in last_writes(_since(events, commit), wanted).items():
        now = digest(os.path.join(workdir, rel))
        if (logged is None and now is None) or (bool(logged) and logged == now):
            out.add(rel)
    return out


__all__ = ["digest", "explained"]
