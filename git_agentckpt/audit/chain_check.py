"""The checkpoint chain of one task, against its event log (`events_check.LogScan`).

- the chain from the ref links up: numbers N, N-1, … 1, each commit rehashed,
  its objects stored, the first one's parent its baseline;
- each checkpoint has its `checkpoint.prepare` (write-ahead order) and its
  `checkpoint.commit` after it, and the chain's prepares are in chain order;
- every checkpoint the log says was committed is still in the chain: one the
  ref no longer reaches was moved back or cut out (tampering), unless another
  clone committed it and its chain is kept in a `refs/ckpt-remotes/` mirror;
- state claims: a step a note marks done has its step-end checkpoint, and
  that checkpoint its `step.end` event (design section 1).
Notes are checked by `notes_check`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from git_agentckpt.audit.events_check import LogScan
from git_agentckpt.audit.per_commit import CommitContext, check_commit
from git_agentckpt.audit.problems import Problem, read_error_kind
from git_agentckpt.git.audit_read import (
    RawCommit,
    first_parent_chain,
    missing_objects,
    read_raw_commit,
)
from git_agentckpt.store.checkpoints import RESUME_TRIGGER, STEP_END_TRIGGER
from git_agentckpt.trailers import parse_trailers


@dataclass(frozen=True)
class Link:
    commit: RawCommit
    number: int | None
    trigger: str
    step: str | None
    baseline: str | None


def _none(value: str | None) -> str | None:
    return None if value in (None, "", "none") else value


@dataclass
class ChainWalk:
    task: str
    links: list[Link]  # newest first
    problems: list[Problem]

    def problem(self, kind: str, where: str, detail: str, severity: str = "error") -> None:
        self.problems.append(Problem(self.task, kind, where, detail, severity))  # type: ignore[arg-type]


def _parse(walk: ChainWalk, commit: RawCommit, first: bool) -> Link | None:
    """The checkpoint `commit` records; None where the chain ends (its baseline)."""
    tr = parse_trailers(commit.message)
    if "Checkpoint-Id" not in tr or "Task" not in tr:
        if first:
            walk.problem("ref-damaged", commit.id, "the task's ref is not at a checkpoint commit")
        return None
    if tr["Task"] != walk.task:
        kind, what = ("ref-damaged", "the ref") if first else ("chain-broken", "the chain")
        walk.problem(kind, commit.id, f"{what} reaches a checkpoint of task {tr['Task']!r}")
        return None
    seq = tr.get("Seq", "")
    number = int(seq) if seq.isdigit() and len(seq) < 18 else None
    if number is None:
        walk.problem("checkpoint-malformed", commit.id, f"Seq trailer {seq[:30]!r}")
    return Link(
        commit, number, tr.get("Trigger", ""), _none(tr.get("Step")), _none(tr.get("Baseline"))
    )


def walk_chain(ctx: CommitContext, tip: str) -> ChainWalk:
    walk = ChainWalk(ctx.task, [], [])
    for commit in first_parent_chain(ctx.repo, tip):
        first = not walk.links
        if commit.error is not None:
            kind = read_error_kind(commit.error)
            what = "the ref's commit" if first else f"the parent of {walk.links[-1].commit.id[:12]}"
            walk.problem(kind, commit.id, f"{what} ({commit.error}): the chain is broken")
            return walk
        link = _parse(walk, commit, first)
        if link is None:
            break
        walk.links.append(link)
    _check_numbers(walk)
    return walk


def _check_numbers(walk: ChainWalk) -> None:
    for newer, older in zip(walk.links, walk.links[1:], strict=False):
        if (
            newer.number is not None
            and older.number is not None
            and newer.number != older.number + 1
        ):
            walk.problem(
                "chain-broken",
                newer.commit.id,
                f"checkpoint {newer.number}'s parent is checkpoint {older.number}: "
                "checkpoints were cut out",
            )
    if not walk.links:
        return
    oldest = walk.links[-1]
    if oldest.number not in (None, 1):
        walk.problem(
            "chain-broken",
            oldest.commit.id,
            f"the chain starts at checkpoint {oldest.number}: checkpoints before it were cut out",
        )
    parent = oldest.commit.parents[0] if oldest.commit.parents else None
    if oldest.number == 1 and oldest.baseline is not None and parent != oldest.baseline:
        walk.problem(
            "chain-broken",
            oldest.commit.id,
            f"the first checkpoint's parent is not its baseline {oldest.baseline[:12]}",
        )


def _parent_tree(ctx: CommitContext, commit: RawCommit) -> str | None:
    """The tree of the first checkpoint's parent (the user's commit it started from): its
    objects are the user's history, which git keeps; only what the task added is looked up."""
    if not commit.parents:
        return None
    parent = read_raw_commit(ctx.repo, commit.parents[0])
    return parent.tree if parent.error is None else None


def check_links(ctx: CommitContext, walk: ChainWalk, scan: LogScan) -> int:
    """Per checkpoint: rehash, per-commit checks, objects, its events. Returns objects missing."""
    seen: set[str] = set()
    missing_total = 0
    later_prepare: int | None = None
    for i, link in enumerate(walk.links):
        c = link.commit
        if not c.intact:
            walk.problem("object-corrupt", c.id, "the checkpoint commit does not hash to its id")
        walk.problems.extend(check_commit(ctx, c, "checkpoint"))
        base = walk.links[i + 1].commit.tree if i + 1 < len(walk.links) else _parent_tree(ctx, c)
        missing = missing_objects(ctx.repo, c.tree, base, seen)
        missing_total += len(missing)
        if missing:
            shown = ", ".join(missing[:3]) + (
                f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            )
            walk.problem(
                "missing-object", c.id, f"checkpoint {link.number}'s snapshot lacks {shown}"
            )
        prepared = scan.prepared.get(c.id)
        committed = scan.committed.get(c.id)
        if prepared is None:
            walk.problem(
                "checkpoint-unprepared",
                c.id,
                f"checkpoint {link.number} has no checkpoint.prepare event in the log: it was "
                "forged or rewritten, or the log was truncated",
            )
        elif later_prepare is not None and prepared > later_prepare:
            walk.problem(
                "event-order", c.id, f"checkpoint {link.number} was prepared after its child"
            )
        if committed is None:
            walk.problem(
                "commit-event-missing",
                c.id,
                f"checkpoint {link.number} has no checkpoint.commit event (a crash before it "
                "was logged, which resume rolls forward, or it was deleted)",
                "warning",
            )
        elif prepared is not None and committed < prepared:
            walk.problem(
                "event-order", c.id, f"checkpoint {link.number}'s commit event precedes its prepare"
            )
        later_prepare = prepared if prepared is not None else later_prepare
    return missing_total


def check_committed(
    ctx: CommitContext,
    walk: ChainWalk,
    scan: LogScan,
    tip: str | None,
    mirrored: Callable[[str], bool],
) -> None:
    """Every checkpoint the log says was committed is in the chain (or another clone's)."""
    in_chain = {link.commit.id for link in walk.links}
    for ckpt in sorted(scan.committed, key=lambda c: scan.committed[c]):
        if ckpt in in_chain:
            continue
        where = ckpt
        said = f"its checkpoint.commit event ({scan.committed_where[ckpt]})"
        if mirrored(ckpt):
            walk.problem("committed-elsewhere", where, f"{said}: kept in a remote's mirror", "info")
        elif tip is not None and ctx.repo.exists(ckpt) and ctx.repo.is_ancestor(tip, ckpt):
            walk.problem(
                "ref-moved-back",
                where,
                f"{said} says it was committed, but the task's ref was moved back to "
                f"{tip[:12]}, behind it (tampering)",
            )
        elif ctx.repo.exists(ckpt):
            walk.problem(
                "checkpoint-unreachable",
                where,
                f"{said} says it was committed, but the task's ref no longer reaches it: "
                "the ref was deleted or reset, or the chain rewritten (tampering)",
            )
        elif ckpt in scan.committed_merged:
            walk.problem("committed-elsewhere", where, f"{said} came from another clone", "info")
        else:  # another clone's chain never fetched here, or ours cut and its objects pruned
            walk.problem(
                "committed-elsewhere",
                where,
                f"{said} says it was committed; the commit is not stored here: another clone's "
                "chain that was never fetched, or a chain rewritten and pruned",
                "warning",
            )


def check_claims(walk: ChainWalk, scan: LogScan, done_steps: dict[str, list[str]]) -> None:
    """Done steps of each note backed by step-end checkpoints and their `step.end` events.
    `done_steps`: checkpoint commit -> the steps its note marks done."""
    proven: set[str] = set()
    reported: set[str] = set()
    for link in reversed(walk.links):  # oldest first
        c = link.commit
        done = done_steps.get(c.id, [])
        if link.trigger == STEP_END_TRIGGER and link.step:
            prepared = scan.prepared.get(c.id)
            ends = scan.step_ends.get(link.step, [])
            if not any(prepared is None or p < prepared for p in ends):
                walk.problem(
                    "claim-unbacked",
                    c.id,
                    f"step-end checkpoint {link.number} of step {link.step} has no step.end "
                    "event before it",
                )
            proven.add(link.step)
        elif link.trigger == RESUME_TRIGGER:
            proven &= set(done)
        for step in done:
            if step not in proven and step not in reported:
                reported.add(step)
                walk.problem(
                    "claim-unbacked",
                    c.id,
                    f"the note of checkpoint {link.number} marks step {step} done, but no "
                    "step-end checkpoint of it precedes",
                )
