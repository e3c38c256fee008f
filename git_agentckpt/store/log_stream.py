"""Reading an event log as a stream: constant memory, one commit at a time.

`stream` gives each event as its commit is read, oldest first (`git log --reverse`:
this process holds one commit at a time, git itself holds every message until it can
write the first), and with `-n N` reads only the last N events' commits, back from
the tip. `git ckpt log` of a whole log goes through `rendered`: read newest first, as
git streams it (git then holds nothing and works while the events are checked), each
event rendered, and the lines given back oldest first through a spool
(store/log_spool.py). Events are stored as canonical JSON lines; a line that checks as
a well-formed event is printed as stored, without being parsed into objects and
encoded again. Anything else (another writer's spacing, extra keys, a number as
text) goes through `Event.from_json`, as every read does, and a line that is not an
event at all (damaged, or brought by a fetch from a careless writer) is skipped and
named once as a warning. Big payloads stored apart (store/payloads.py) stay references here unless
the caller asks for them (`git ckpt log --full`). Filters (`--type`, `--step`,
`--since`, `--actor`: store/log_filter.py) apply to each event as it is read; with
`-n N` the walk back stops at the Nth matching event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from git_agentckpt.errors import CkptError
from git_agentckpt.git.repo import CommitInfo
from git_agentckpt.model import JSON, Event, summary_words
from git_agentckpt.paths import json_safe
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.log_filter import LogFilter, details_line
from git_agentckpt.store.payloads import MARK, load, payload_ref, placeholder, refs_in
from git_agentckpt.store.refs import TaskName

if TYPE_CHECKING:
    from git_agentckpt.store.log_spool import ReverseSpool

_decode = json.JSONDecoder().raw_decode


class LogEntry(NamedTuple):  # a tuple: made for every event of a long log, made fast
    obj: dict[str, JSON]  # the event's JSON object, checked
    line: str | None  # its stored text when that is already what we would print
    merged: bool  # brought in by a union merge from another clone
    commit: str  # the event commit holding it
    stored_apart: str = ""  # `[output: 1.2 MiB stored apart]` (store/payloads.py)

    @property
    def event(self) -> Event:
        return Event.from_json(self.obj)

    def text_line(self) -> str:
        """`  seq* ts  type step=… - message  [output: 98 KiB stored apart]`: the line
        `git ckpt log` prints (from the checked object: no Event is built per line)."""
        o = self.obj
        what = summary_words(o["type"], o.get("links") or {}, o["actor"], o.get("data"))
        mark = "*" if self.merged else " "
        apart = f"  {self.stored_apart}" if self.stored_apart else ""
        head = f"{o['seq']:>5}{mark} {o['ts']}  {what}{apart}"
        if "input" not in o and "output" not in o and "data" not in o:
            return head
        shown = o  # a payload stored apart is named on the first line, not repeated
        if self.stored_apart:
            shown = {k: v for k, v in o.items() if payload_ref(v) is None}
        more = details_line(shown)
        return f"{head}\n{' ' * 31}{more}" if more else head

    def json_line(self) -> str:
        """One compact JSON line, keys sorted (the stored text when it is canonical)."""
        if self.line is not None:
            return self.line
        value = json_safe(self.event.to_json())
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _plain(obj: dict[str, JSON]) -> bool:
    """Whether `obj` is exactly what `Event.to_json` writes (so its text can be printed).
    On every line of a long log: written for speed (`is` class checks, one pass)."""
    try:
        v, seq, actor = obj["v"], obj["seq"], obj["actor"]
        id_, ts, task, type_ = obj["id"], obj["ts"], obj["task"], obj["type"]
    except KeyError:
        return False
    if v.__class__ is not int or v != 1 or seq.__class__ is not int:
        return False
    if actor.__class__ is not dict:
        return False
    if not (id_.__class__ is str and ts.__class__ is str and task.__class__ is str):
        return False
    if type_.__class__ is not str:
        return False
    n = 7
    for key in ("input", "output"):
        if key in obj:
            if obj[key] is None:
                return False
            n += 1
    for key in ("links", "data"):
        if key in obj:
            value = obj[key]
            if value.__class__ is not dict or not value:
                return False
            n += 1
    return len(obj) == n  # no other key


def _full(
    log: EventLog, info: CommitInfo, entry: LogEntry, warn: Callable[[str], None]
) -> LogEntry:
    """The entry with its payloads stored apart loaded back (`log --full`)."""
    if not refs_in(entry.obj):
        return entry
    try:
        return LogEntry(load(log.repo, info.tree, entry.obj), None, entry.merged, entry.commit)
    except CkptError as exc:
        warn(f"event log commit {info.id[:12]}: {exc.message} (shown as stored)")
        return entry


def _entries(info: CommitInfo, warn: Callable[[str], None]) -> list[LogEntry]:
    _, _, body = info.message.partition("\n\n")
    merged = len(info.parents) > 1
    out: list[LogEntry] = []
    for raw in body.split("\n"):
        line = raw if raw[:1] == "{" and raw[-1:] == "}" else raw.strip()
        if line[:1] != "{":
            continue
        try:
            obj, end = _decode(line)  # json.loads without its wrappers (every line)
            if end != len(line):
                raise ValueError("extra data")
        except (ValueError, RecursionError):
            warn(f"event log commit {info.id[:12]} holds malformed JSON (skipped)")
            continue
        if isinstance(obj, dict) and _plain(obj):
            text = None if "\\" in line and "\\u" in line else line  # (`in`: fast on one char)
            apart = placeholder(obj) if "$" in line and MARK in line else ""
            out.append(LogEntry(obj, text, merged, info.id, apart))
            continue
        try:
            ev = Event.from_json(obj) if isinstance(obj, dict) else None
        except CkptError as exc:
            warn(f"event log commit {info.id[:12]}: {exc.message} (skipped)")
            continue
        if ev is None:
            warn(f"event log commit {info.id[:12]} holds a line that is not an event (skipped)")
            continue
        fixed = ev.to_json()
        out.append(LogEntry(fixed, None, merged, info.id, placeholder(fixed)))
    return out


def stream(
    log: EventLog,
    task: TaskName,
    limit: int | None,
    warn: Callable[[str], None],
    full: bool = False,
    filt: LogFilter | None = None,
) -> Iterator[LogEntry]:
    """The events of `task`'s log, oldest first; with `limit`, only the last `limit`
    (and only their commits are read); `full`: payloads stored apart loaded back;
    `filt`: only the events it selects (with `limit`: the last `limit` of those)."""
    tip = log.repo.read_ref(task.events_ref)
    if tip is None:
        return
    f = filt if filt is not None and not filt.empty else None

    def entries(info: CommitInfo) -> list[LogEntry]:
        found = _entries(info, warn)
        return [_full(log, info, e, warn) for e in found] if full else found

    if limit is None:
        opened = f is None or f.since_commit is None
        for info in log.repo.walk_oldest_first(tip):
            for e in entries(info):
                if f is None:
                    yield e
                    continue
                opened = opened or f.opens(e.obj)
                if opened and f.match(e.obj):
                    yield e
        if not opened and f is not None:
            warn(_never_opened(f))
        return
    yield from _last(log, tip, limit, f, entries, warn)


def rendered(
    log: EventLog,
    task: TaskName,
    render: Callable[[LogEntry], str],
    warn: Callable[[str], None],
    full: bool = False,
    filt: LogFilter | None = None,
    merged: Callable[[], None] | None = None,
) -> Iterator[str]:
    """The whole log as `stream` gives it, each entry through `render`, in chunks of
    lines (joined by newlines) oldest first. Read newest first (`walk_streamed`: git
    then holds no message and works while this renders) and given back in reverse
    through a spool (store/log_spool.py): memory stays flat. The warnings come in log
    order, as `stream` gives them; `--since CHECKPOINT` shows from the oldest prepare
    event of that checkpoint on, as `stream` does. `merged` is called (once, before the
    first chunk) when an entry shown came in by a union merge."""
    from git_agentckpt.store.log_spool import ReverseSpool

    tip = log.repo.read_ref(task.events_ref)
    if tip is None:
        return
    f = filt if filt is not None and not filt.empty else None
    held: list[list[str]] = []  # each commit's warnings, the newest commit first
    with ReverseSpool() as spool:
        cut = _spool_back(log, tip, render, f, full, spool, held)
        for said in reversed(held):
            for line in said:
                warn(line)
        if cut is None and f is not None and f.since_commit is not None:
            warn(_never_opened(f))
            return
        if merged is not None and spool.marked(cut):
            merged()
        yield from spool.back(cut)


def _spool_back(
    log: EventLog,
    tip: str,
    render: Callable[[LogEntry], str],
    f: LogFilter | None,
    full: bool,
    spool: ReverseSpool,
    held: list[list[str]],
) -> int | None:
    """`rendered`'s read: the entries `f` selects, rendered newest first into `spool`
    (a block ends at each opening event of `f.since_commit`), each commit's warnings
    added to `held`. Returns how many blocks `--since` shows (None: every block, or
    with `since_commit`: its event never came)."""
    from git_agentckpt.store.log_spool import BLOCK

    opens = f.opens if f is not None and f.since_commit is not None else None
    cut = None
    block: list[str] = []
    marked = False  # an entry of `block` came in by a merge
    for info in log.repo.walk_streamed(tip):
        said: list[str] = []
        found = _entries(info, said.append)
        if full:
            found = [_full(log, info, e, said.append) for e in found]
        if said:
            held.append(said)
        for e in reversed(found):
            if f is None or f.match(e.obj):
                block.append(render(e))
                marked = marked or e.merged
            opening = opens is not None and opens(e.obj)
            if opening or len(block) >= BLOCK:
                spool.add(block, marked)
                marked = False
                cut = spool.blocks if opening else cut
    spool.add(block, marked)
    return cut


def _never_opened(f: LogFilter) -> str:
    return (
        f"checkpoint {str(f.since_commit)[:12]} has no checkpoint.prepare event in this log: "
        "nothing shown from it (`git ckpt verify` checks the trail)"
    )


def _last(
    log: EventLog,
    tip: str,
    limit: int,
    f: LogFilter | None,
    entries: Callable[[CommitInfo], list[LogEntry]],
    warn: Callable[[str], None],
) -> Iterator[LogEntry]:
    """The last `limit` selected events, oldest first: read back from the tip only
    until they are found (or the `since_commit` event is reached)."""
    last: list[LogEntry] = []
    opened = f is None or f.since_commit is None
    for info in log.repo.walk(tip):
        if len(last) >= limit:  # (a `since_commit` checkpoint of this task is further back)
            opened = True
            break
        if opened and f is not None and f.since_commit:
            break
        for e in reversed(entries(info)):
            if f is None or f.match(e.obj):
                last.append(e)
            if f is not None and f.since_commit and f.opens(e.obj):
                opened = True
                break
    if not opened and f is not None:
        warn(_never_opened(f))
        return
    del last[limit:]
    last.reverse()
    yield from last
