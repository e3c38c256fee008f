"""The write-ahead guard on agent refs, shared by the git hook and the tool's own writes.

- `refs/agent/checkpoints/<task>` may only move to a checkpoint commit of that
  task whose `checkpoint.prepare` event is in the task's event log (the log's
  new value when the same transaction moves it, as a fetch or push does), and
  only forward (to a descendant);
- `refs/agent/events/*`, `refs/agent/reports/*` and `refs/notes/agent/*` only
  move forward; no audit ref is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from git_agentckpt.errors import CorruptError, NotFound
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store.events import events_of
from git_agentckpt.store.refs import CHECKPOINTS, EVENTS, REPORTS
from git_agentckpt.trailers import parse_trailers

ZERO = "0" * 40
GUARDED_FORWARD = (EVENTS, REPORTS, "refs/notes/agent/")


@dataclass(frozen=True)
class Update:
    old: str
    new: str
    ref: str


def parse_updates(lines: Iterable[str]) -> list[Update]:
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            out.append(Update(*parts))
    return out


def _prepared(repo: GitRepo, events_tip: str | None, commit: str) -> bool:
    """Whether the log at `events_tip` holds a `checkpoint.prepare` naming `commit`.

    The whole first-parent chain is searched, however long: a checkpoint whose
    prepare lies 10,000 events back is as valid as a new one. Only commits whose
    message holds the checkpoint's id are parsed, so the walk reads messages only.
    """
    if events_tip is None or events_tip == ZERO:
        return False
    for info in repo.walk(events_tip):
        if commit not in info.message:
            continue
        for ev in events_of(info):
            if ev.type == "checkpoint.prepare" and ev.links.get("checkpoint") == commit:
                return True
    return False


def check_updates(repo: GitRepo, updates: list[Update]) -> list[str]:
    """Reasons to refuse the transaction (empty: allowed)."""
    problems: list[str] = []
    in_txn = {u.ref: u.new for u in updates}
    for u in updates:
        if u.ref.startswith(CHECKPOINTS) or u.ref.startswith(GUARDED_FORWARD):
            if u.new == ZERO:
                problems.append(f"{u.ref}: audit refs are never deleted")
                continue
            # git passes a zero old value when the writer did not name one: read it
            old = u.old if u.old != ZERO else (repo.read_ref(u.ref) or ZERO)
            if old != ZERO and repo.exists(old) and not repo.is_ancestor(old, u.new):
                problems.append(
                    f"{u.ref}: may only move forward ({old[:12]} is not an "
                    f"ancestor of {u.new[:12]})"
                )
                continue
        if not u.ref.startswith(CHECKPOINTS):
            continue
        task = u.ref[len(CHECKPOINTS) :]
        try:
            trailers = parse_trailers(repo.read_commit(u.new).message)
        except (NotFound, CorruptError):
            problems.append(f"{u.ref}: {u.new[:12]} is not a commit")
            continue
        if trailers.get("Task") != task or "Checkpoint-Id" not in trailers:
            problems.append(f"{u.ref}: {u.new[:12]} is not a checkpoint commit of task {task!r}")
            continue
        events_ref = EVENTS + task
        events_tip = in_txn.get(events_ref) or repo.read_ref(events_ref)
        try:
            prepared = _prepared(repo, events_tip, u.new)
        except (CorruptError, NotFound) as exc:
            problems.append(f"{u.ref}: cannot read {events_ref}: {exc.one_line()}")
            continue
        if not prepared:
            hint = (
                ""
                if events_ref in in_txn
                else (
                    "; push or fetch agent refs with --atomic so the event log moves in the "
                    "same transaction"
                )
            )
            problems.append(
                f"{u.ref}: no checkpoint.prepare event for {u.new[:12]} in "
                f"{events_ref} (write-ahead order){hint}"
            )
    return problems
