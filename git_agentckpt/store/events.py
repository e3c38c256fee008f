"""The append-only event log: an orphan history `refs/agent/events/<task>`.

One commit per append (a single event or a batch). The subject is one readable
line, the body holds the events as JSON Lines; the tree is empty, or holds the
payloads above 64 KiB stored apart (store/payloads.py). Appends are
compare-and-swap moves of the log ref, so concurrent writers never lose an
event: a writer that lost the race rebuilds its commit on the new tip.
Secrets are redacted before the commit object is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import CkptError, CorruptError
from git_agentckpt.git.ref_moves import retry_cas
from git_agentckpt.git.repo import CommitInfo, GitRepo
from git_agentckpt.model import Event, NewEvent, check_event_type, dumps, iso_now, new_ulid
from git_agentckpt.redact import Redactor, default_redactor
from git_agentckpt.store.payloads import refs_in, store_apart, tree_of
from git_agentckpt.store.redaction import check_name, redact_event
from git_agentckpt.store.refs import EVENTS, TaskName


def events_of(info: CommitInfo) -> list[Event]:
    _, _, body = info.message.partition("\n\n")
    lines = [x for x in (line.strip() for line in body.splitlines()) if x.startswith("{")]
    if not lines:
        return []
    try:  # one decode for the whole batch: a loads() per line costs 10x more
        objs = json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError as exc:
        raise CorruptError(f"event log commit {info.id[:12]} holds malformed JSON") from exc
    except RecursionError as exc:
        raise CorruptError(f"event log commit {info.id[:12]} nests JSON too deeply") from exc
    if len(objs) != len(lines) or not all(isinstance(o, dict) for o in objs):
        raise CorruptError(f"event log commit {info.id[:12]} holds malformed JSON")
    try:
        return [Event.from_json(o) for o in objs]
    except CkptError as exc:
        raise CorruptError(f"event log commit {info.id[:12]}: {exc.message}") from exc


DIGEST_TRAILER = "Log-Digest"
_DIGEST_MARK = "\n\n" + DIGEST_TRAILER + ": "


def log_digest(parent_digest: str | None, content: str) -> str:
    """The chained digest of an event commit: sha256 of the first parent's digest and the
    commit's message up to its `Log-Digest` trailer. It binds the events to the commit
    (`git ckpt verify` recomputes it: an edited, removed or moved event breaks it)."""
    h = hashlib.sha256((parent_digest or "").encode() + b"\n")
    h.update(content.encode("utf-8", "surrogatepass"))
    return "sha256:" + h.hexdigest()


PARENT_HEAD = "Parent-Head"


def head_digest(head: str) -> str:
    """sha256 of the lines of a commit's stored header that the next event commit binds
    in its `Parent-Head` line: `tree`, `author`, `committer` (who wrote it, when)."""
    keep = ("tree ", "author ", "committer ")
    lines = "".join(line + "\n" for line in head.split("\n") if line.startswith(keep))
    return "sha256:" + hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()


def parent_head_of(content: str) -> str | None:
    """The `Parent-Head` value a message's content (up to its Log-Digest) carries."""
    mark = "\n" + PARENT_HEAD + ": "
    at = content.rfind(mark)
    return content[at + len(mark) :].split("\n", 1)[0].strip() or None if at >= 0 else None


def split_digest(message: str) -> tuple[str, str | None]:
    """(the message up to its `Log-Digest` trailer, the digest or None if it has none)."""
    at = message.rfind(_DIGEST_MARK)
    if at < 0:
        return message, None
    value = message[at + len(_DIGEST_MARK) :].strip()
    return message[: at + 1], value or None


def with_digest(content: str, parent_message: str | None, parent_head: str = "") -> str:
    """`content` (ending in a newline) with, when it has a first parent, a `Parent-Head`
    line binding that parent's tree, author and committer (`parent_head`: its stored
    header, `GitRepo.commit_text`), then its `Log-Digest` trailer."""
    parent = split_digest(parent_message)[1] if parent_message is not None else None
    if parent_head:
        content += f"{PARENT_HEAD}: {head_digest(parent_head)}\n"
    return content + f"\n{DIGEST_TRAILER}: {log_digest(parent, content)}\n"


def _subject(events: Sequence[Event]) -> str:
    if len(events) == 1:
        return events[0].summary()
    types = sorted({e.type for e in events})
    shown = ", ".join(types[:4]) + (", …" if len(types) > 4 else "")
    return f"#{events[0].seq}..#{events[-1].seq} batch of {len(events)} events: {shown}"


# Called after each append with the repository and the task (errors are the hook's own):
# the daemon brings the task's cache files to the new tip after the answer
# (`store/warm_caches.after_append`, registered by `cli/daemon_warm.py`).
APPEND_HOOKS: list[Callable[[GitRepo, TaskName], None]] = []


class Batch:
    """Events of one append, redacted, to commit on a tip of the log (`commit_on`)."""

    def __init__(self, log: EventLog, task: TaskName, clean: list[NewEvent], tree: str) -> None:
        self.log = log
        self.task = task
        self.clean = clean
        self.tree = tree

    def commit_on(self, old: str | None) -> tuple[str, list[Event]]:
        """The event commit on `old` (the log's tip; None: the first), with its events
        numbered after the tip's: the ref is not moved."""
        repo = self.log.repo
        last_seq = self.log.last_seq_at(old)
        ts = iso_now()
        events = [
            Event(
                id=new_ulid(),
                seq=last_seq + i + 1,
                ts=ts,
                task=self.task.name,
                type=ev.type,
                actor=ev.actor,
                input=ev.input,
                output=ev.output,
                links=ev.links,
                data=ev.data,
            )
            for i, ev in enumerate(self.clean)
        ]
        body = "\n".join(dumps(e.to_json()) for e in events)
        parent_head, parent_message = repo.commit_text(old) if old else ("", None)
        content = _subject(events) + "\n\n" + body + "\n"
        message = with_digest(content, parent_message, parent_head)
        return repo.commit(self.tree, [old] if old else [], message, sign=True), events


class EventLog:
    def __init__(self, repo: GitRepo, redactor: Redactor | None = None) -> None:
        self.repo = repo
        self._redactor = redactor

    @property
    def redactor(self) -> Redactor:
        return self._redactor or default_redactor()

    def tasks(self) -> list[TaskName]:
        return [TaskName.from_ref(r) for r in sorted(self.repo.list_refs(EVENTS))]

    def append(self, task: TaskName, new_events: Sequence[NewEvent]) -> list[Event]:
        """Append events in one commit; returns them with id, seq and ts assigned. A
        writer that moved the log first is no conflict: the commit is built again on its
        tip (these events change no state, or their caller holds the task's lock)."""
        if not new_events:
            return []
        batch = self.batch(task, new_events)
        ref = task.events_ref
        result: list[Event] = []

        def attempt() -> str | None:
            old = self.repo.read_ref(ref)
            commit, events = batch.commit_on(old)
            crash_point("event.object")
            if not self.repo.cas_ref(ref, commit, old, f"git ckpt: {events[0].type}"):
                return None
            crash_point("event.ref")
            result[:] = events
            return commit

        retry_cas(attempt, f"appending to the event log of {task}")
        self.appended(task)
        return result

    def appended(self, task: TaskName) -> None:
        """After the log of `task` moved: the hooks that follow it (the daemon's caches)."""
        for hook in APPEND_HOOKS:
            with contextlib.suppress(Exception):
                hook(self.repo, task)

    def batch(self, task: TaskName, new_events: Sequence[NewEvent]) -> Batch:
        """`new_events` checked and redacted, their large payloads stored apart: ready to
        be committed on any tip of the log (`Batch.commit_on`)."""
        for ev in new_events:
            check_event_type(ev.type)
        r = self.redactor
        check_name(r, "task name", task.name)  # the gate: store/redaction.py
        clean = [redact_event(r, ev) for ev in new_events]
        # payloads above 64 KiB: blobs in the event commit's tree (store/payloads.py)
        clean, blobs = store_apart(self.repo, clean)
        return Batch(self, task, clean, tree_of(self.repo, blobs))

    def last_seq_at(self, tip: str | None) -> int:
        """The highest event number of the log at `tip` (0: empty)."""
        return self._last_seq(tip)

    def _last_seq(self, tip: str | None) -> int:
        """The highest `seq` so far: the last JSON line of the tip is parsed, and for a
        union merge (whose copied events keep their own numbers) its first parent's too."""
        if tip is None:
            return 0
        info = self.repo.read_commit(tip)
        last = 0
        for line in reversed(info.message.splitlines()):
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as exc:
                    raise CorruptError(f"event log commit {tip[:12]} holds malformed JSON") from exc
                seq = obj.get("seq") if isinstance(obj, dict) else None
                if isinstance(seq, int):
                    last = seq
                    break
        if len(info.parents) > 1:
            copied = [e.seq for e in events_of(info)]
            last = max([last, *copied, self._last_seq(info.parents[0])])
        return last

    def union_commit(self, task: TaskName, ours: str, theirs: str, origin: str) -> tuple[str, int]:
        """A commit uniting two diverged logs of `task`, and how many events it adds.

        Its parents are [ours, theirs]; its body holds their events that our
        first-parent chain lacks (by id, in their order, verbatim), so every
        reader keeps walking first parents and the other clone can fast-forward
        to it. Nothing is rewritten. Moving the ref is the caller's CAS.
        """
        have = {e.id for e in self.iter_back(task)}
        gained: list[Event] = []
        for ev in self.since(theirs, ours):
            if ev.id not in have:
                have.add(ev.id)
                gained.append(ev)
        subject = f"merge {len(gained)} event(s) from {self.redactor.text(origin)}"
        body = "\n".join(dumps(e.to_json()) for e in gained)
        content = subject + "\n\n" + (body + "\n" if body else "")
        head, ours_message = self.repo.commit_text(ours)
        message = with_digest(content, ours_message, head)
        tree = tree_of(self.repo, [b for e in gained for b in refs_in(e.to_json())])
        return self.repo.commit(tree, [ours, theirs], message, sign=True), len(gained)

    def since(self, tip: str, other: str | None) -> list[Event]:
        """Events on `tip`'s first-parent chain that `other` does not have, oldest first."""
        out: list[Event] = []
        for info in self.repo.walk(tip):
            if other is not None and self.repo.is_ancestor(info.id, other):
                break
            out.extend(reversed(events_of(info)))
        out.reverse()
        return out

    def iter_back(self, task: TaskName) -> Iterator[Event]:
        """Events newest first (reads only as far back as the caller iterates)."""
        for ev, _ in self.iter_back_marked(task):
            yield ev

    def iter_back_marked(self, task: TaskName) -> Iterator[tuple[Event, bool]]:
        """Events newest first, each with whether a union merge brought it in (written by
        another clone: it keeps that clone's `seq`, so numbers may repeat or go back)."""
        tip = self.repo.read_ref(task.events_ref)
        if tip is None:
            return
        for info in self.repo.walk(tip):
            merged = len(info.parents) > 1
            for ev in reversed(events_of(info)):
                yield ev, merged

    def read(self, task: TaskName) -> list[Event]:
        """All events, oldest first."""
        events = list(self.iter_back(task))
        events.reverse()
        return events

    def exists(self, task: TaskName) -> bool:
        return self.repo.read_ref(task.events_ref) is not None
