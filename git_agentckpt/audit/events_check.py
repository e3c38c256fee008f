"""The event log of one task, read as an auditor: every commit rehashed, every line parsed.

Checked along the first-parent chain, oldest first: the `Log-Digest` chain
(content bound to its commit; older events without one are counted), event
ids unique, each event of its own task, and the writer's sequence without
gaps or steps back (a union merge brings another clone's numbers; the next
own event continues after the highest). What the checkpoint checks need
(positions of prepare / commit / step.end events) is gathered on the way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from git_agentckpt.audit.per_commit import CommitContext, check_commit
from git_agentckpt.audit.problems import Problem, read_error_kind
from git_agentckpt.errors import CkptError
from git_agentckpt.git.audit_read import RawCommit, first_parent_chain, missing_objects
from git_agentckpt.git.repo import EMPTY_TREE
from git_agentckpt.model import JSON, Event
from git_agentckpt.store.events import head_digest, log_digest, parent_head_of, split_digest


@dataclass(frozen=True)
class ReportWrite:
    """An event that wrote a recovery report's files, and the blobs it bound."""

    where: str
    report: str
    files: dict[str, JSON]  # file -> blob id, as written
    read: dict[str, JSON] | None  # file -> blob id of the report it rewrote (a confirm)


@dataclass
class LogScan:
    task: str
    tip: str | None
    commits: int = 0
    events: int = 0
    undigested: int = 0
    digested: bool = False
    last_seq: int = 0
    ids: set[str] = field(default_factory=set)
    prepared: dict[str, int] = field(default_factory=dict)  # checkpoint commit -> position
    prepared_in: dict[str, str] = field(default_factory=dict)  # checkpoint -> its log commit
    prepare_data: dict[str, dict[str, JSON]] = field(default_factory=dict)
    committed: dict[str, int] = field(default_factory=dict)
    committed_where: dict[str, str] = field(default_factory=dict)  # for messages
    committed_merged: set[str] = field(default_factory=set)  # came by a union merge
    step_ends: dict[str, list[int]] = field(default_factory=dict)  # step -> positions (done)
    reports: set[str] = field(default_factory=set)  # the report ids events name
    report_writes: list[ReportWrite] = field(default_factory=list)  # in log order
    problems: list[Problem] = field(default_factory=list)

    def problem(self, kind: str, where: str, detail: str, severity: str = "error") -> None:
        self.problems.append(Problem(self.task, kind, where, detail, severity))  # type: ignore[arg-type]


def _chain(ctx: CommitContext, tip: str, scan: LogScan) -> list[RawCommit]:
    chain = list(first_parent_chain(ctx.repo, tip))
    if chain and chain[-1].error is not None:
        bad = chain.pop()
        kind = read_error_kind(bad.error or "")
        what = "the log's tip" if not chain else f"the parent of {chain[-1].id[:12]}"
        scan.problem(kind, bad.id, f"{what} ({bad.error}): the events before it cannot be read")
    chain.reverse()
    return chain


def _events(commit: RawCommit, scan: LogScan) -> list[Event]:
    _, _, body = commit.message.partition("\n\n")
    lines = [x for x in body.split("\n") if x.startswith("{")]
    if not lines:
        return []
    try:  # one decode for the whole commit; line by line only to name a bad line
        objs = json.loads("[" + ",".join(lines) + "]")
        if len(objs) != len(lines) or not all(isinstance(o, dict) for o in objs):
            raise ValueError("not one object per line")
        return [Event.from_json(o) for o in objs]
    except (ValueError, RecursionError, CkptError):
        pass
    out: list[Event] = []
    for n, line in enumerate(lines):
        where = f"{commit.id[:12]} line {n + 1}"
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            out.append(Event.from_json(obj))
        except (ValueError, RecursionError) as exc:
            scan.problem("event-malformed", where, f"not an event: {str(exc)[:80]}")
        except CkptError as exc:
            scan.problem("event-malformed", where, exc.message[:120])
    return out


def _digest(commit: RawCommit, before: str | None, chained: bool, scan: LogScan) -> str | None:
    """Check `commit`'s Log-Digest against `before` (its parent's; `chained`: the parent
    was read, or it has none); returns its own digest. `scan.digested`: one was seen."""
    content, stored = split_digest(commit.message)
    where = commit.id[:12]
    if stored is None:
        if scan.digested:
            scan.problem(
                "log-digest-missing",
                where,
                "no Log-Digest trailer after commits that have one: written by hand, "
                "or its trailer was cut",
            )
        else:
            scan.undigested += 1
        return None
    scan.digested = True
    if chained and log_digest(before, content) != stored:
        scan.problem(
            "log-digest-mismatch",
            where,
            "its events do not match its Log-Digest (chained from the commit before): an "
            "event was edited, removed or moved here",
        )
    return stored


def _parent_head(commit: RawCommit, head: str, parent: str, scan: LogScan) -> None:
    """The `Parent-Head` line of `commit` against its first parent's stored header."""
    bound = parent_head_of(split_digest(commit.message)[0])
    if bound is not None and bound != head_digest(head):
        scan.problem(
            "commit-metadata-edited",
            parent[:12],
            f"its tree, author or committer (who wrote it, when) differ from what the next "
            f"commit {commit.id[:12]} recorded: the commit was rewritten",
        )


def _head(commit: RawCommit) -> str:
    return commit.raw.partition(b"\n\n")[0].decode("utf-8", "surrogateescape")


def _seq(ev: Event, where: str, scan: LogScan, seen_seq: set[int]) -> None:
    expected = scan.last_seq + 1
    if ev.seq > expected:
        gap = f"#{expected}" if ev.seq == expected + 1 else f"#{expected}..#{ev.seq - 1}"
        scan.problem("seq-gap", where, f"events {gap} are missing before #{ev.seq}")
    elif ev.seq < expected:
        what = "repeats" if ev.seq in seen_seq else "goes back to"
        scan.problem("seq-out-of-order", where, f"#{ev.seq} {what} a number after #{scan.last_seq}")
    seen_seq.add(ev.seq)
    scan.last_seq = max(scan.last_seq, ev.seq)


def _where(commit: str, ev: Event) -> str:
    return f"{commit[:12]} #{ev.seq} {ev.id[:40]}"


def _record(ev: Event, pos: int, commit: str, merged: bool, scan: LogScan) -> None:
    ckpt = ev.links.get("checkpoint")
    where = _where(commit, ev)
    _record_report(ev, where, scan)
    if ev.type == "checkpoint.prepare" and isinstance(ckpt, str):
        scan.prepared.setdefault(ckpt, pos)
        scan.prepared_in.setdefault(ckpt, commit)
        scan.prepare_data.setdefault(ckpt, ev.data)
    elif ev.type == "checkpoint.commit" and isinstance(ckpt, str):
        scan.committed.setdefault(ckpt, pos)
        scan.committed_where.setdefault(ckpt, where)
        if merged:
            scan.committed_merged.add(ckpt)
    elif ev.type == "step.end" and ev.data.get("status") == "done":
        step = ev.links.get("step")
        if isinstance(step, str):
            scan.step_ends.setdefault(step, []).append(pos)


def _record_report(ev: Event, where: str, scan: LogScan) -> None:
    report, files, read = (ev.data.get(k) for k in ("report", "report_files", "report_read"))
    if not isinstance(report, str):
        return
    scan.reports.add(report)
    if isinstance(files, dict):
        bound = read if isinstance(read, dict) else None
        scan.report_writes.append(ReportWrite(where, report, files, bound))


def _theirs(
    ctx: CommitContext, commit: RawCommit, visited: set[str], scan: LogScan
) -> dict[str, dict[str, JSON]]:
    """The events of a union merge's other side that it could copy: the first-parent chain
    of its second parent back to a commit already seen (each commit is walked once)."""
    out: dict[str, dict[str, JSON]] = {}
    for other in first_parent_chain(ctx.repo, commit.parents[1]):
        if other.id in visited:
            break
        visited.add(other.id)
        if other.error is not None:
            kind = read_error_kind(other.error)
            scan.problem(kind, other.id, f"merged by {commit.id[:12]}: {other.error}")
            break
        if not other.intact:
            scan.problem("object-corrupt", other.id, "a merged commit does not hash to its id")
        for ev in _events(other, scan):
            out.setdefault(ev.id, ev.to_json())
    return out


def _check_merged(
    commit: RawCommit, events: list[Event], theirs: dict[str, dict[str, JSON]], scan: LogScan
) -> None:
    for ev in events:
        if theirs.get(ev.id) != ev.to_json():
            scan.problem(
                "merge-unbacked",
                f"{commit.id[:12]} #{ev.seq} {ev.id[:40]}",
                "a union merge carries an event that the log it merged does not hold "
                "(forged, or changed on the way)",
            )


def scan_log(ctx: CommitContext, tip: str | None) -> LogScan:
    scan = LogScan(ctx.task, tip)
    if tip is None:
        return scan
    chain = _chain(ctx, tip, scan)
    seen_seq: set[int] = set()
    visited: set[str] = {c.id for c in chain} if any(len(c.parents) > 1 for c in chain) else set()
    payloads: set[str] = set()
    pos = 0
    before: str | None = None
    parent_head = ""
    for i, commit in enumerate(chain):
        scan.commits += 1
        if not commit.intact:
            scan.problem("object-corrupt", commit.id, "the event commit does not hash to its id")
        scan.problems.extend(check_commit(ctx, commit, "event"))
        # the oldest commit read chains from nothing only when it is the log's root
        before = _digest(commit, before, bool(i) or not commit.parents, scan)
        if i:
            _parent_head(commit, parent_head, chain[i - 1].id, scan)
        parent_head = _head(commit)
        if commit.tree != EMPTY_TREE:  # payloads above 64 KiB, stored apart (store/payloads.py)
            lost = missing_objects(ctx.repo, commit.tree, None, payloads)
            if lost:
                scan.problem("missing-object", commit.id, "stored-apart payload " + lost[0])
        merged = len(commit.parents) > 1
        visited.add(commit.id)
        events = _events(commit, scan)
        if merged:
            _check_merged(commit, events, _theirs(ctx, commit, visited, scan), scan)
        for ev in events:
            pos += 1
            scan.events += 1
            where = _where(commit.id, ev)
            if ev.task != ctx.task:
                scan.problem("event-wrong-task", where, f"the event names task {ev.task[:80]!r}")
            if ev.id in scan.ids:
                scan.problem("event-duplicate-id", where, f"event id {ev.id[:40]} appears twice")
            scan.ids.add(ev.id)
            if merged:  # another clone's numbers: the next own event continues after them
                scan.last_seq = max(scan.last_seq, ev.seq)
            else:
                _seq(ev, where, scan, seen_seq)
            _record(ev, pos, commit.id, merged, scan)
    if scan.undigested:
        scan.problem(
            "log-undigested",
            tip[:12],
            f"{scan.undigested} event commit(s) predate Log-Digest: their content is bound "
            "by git's hash and the sequence checks only",
            "info",
        )
    return scan
