"""The recovery reports of one task: every commit of their history stored and intact, and
each report's files the very blobs that the events which wrote them bound.

Every write of a report (a resume's `recovery.ready`, `recovery.stopped` or
`recovery.finished`; a confirm's `recovery.confirmed` or `recovery.rejected`) names in
its `data.report_files` the blob of each file it wrote, in the same transaction as the
reports commit. A confirm rewrites the report it read, so it also names, in
`data.report_read`, the blobs it found: those must be what the log bound before. So:
- a report edited afterwards (a fast-forward commit on the reports ref), or a file
  added to it or taken out of it, differs from what the log bound: `report-replaced`;
- a report edited before a confirm rewrote it: the confirm read other blobs than the
  resume bound, `report-replaced` at the confirm's event;
- a report that no event of the log names was added by hand: `report-unbound`.
Reports written before this binding existed are named by events without
`report_files`: only their commits are checked.
"""

from __future__ import annotations

from git_agentckpt.audit.events_check import LogScan
from git_agentckpt.audit.per_commit import CommitContext
from git_agentckpt.audit.problems import Problem, read_error_kind
from git_agentckpt.git.audit_read import first_parent_chain
from git_agentckpt.git.tree_check import TREE
from git_agentckpt.model import JSON
from git_agentckpt.store.refs import REPORTS


def check_reports(ctx: CommitContext, tip: str | None, scan: LogScan) -> tuple[list[Problem], int]:
    """The problems of the task's reports at `tip`, and how many report commits were read."""
    out: list[Problem] = []
    top: str | None = None
    read = 0
    for commit in first_parent_chain(ctx.repo, tip) if tip else ():
        read += 1
        if commit.error is not None:
            kind = read_error_kind(commit.error)
            out.append(Problem(ctx.task, kind, commit.id, f"a recovery report: {commit.error}"))
        elif not commit.intact:
            detail = "a recovery report commit does not hash to its id"
            out.append(Problem(ctx.task, "object-corrupt", commit.id, detail))
        elif read == 1:
            top = commit.tree
    if scan.tip is not None and (top is not None or tip is None):
        out += _against_log(ctx, top, scan)
    return out, read


def _bound(scan: LogScan, out: list[Problem]) -> dict[str, dict[str, JSON]]:
    """{report id: {file: blob}} as the log's writes leave each report."""
    bound: dict[str, dict[str, JSON]] = {}
    for w in scan.report_writes:
        if w.read is not None and w.report in bound and w.read != bound[w.report]:
            out.append(
                Problem(
                    scan.task,
                    "report-replaced",
                    w.where,
                    f"this event rewrote report {w.report[:26]}, which it found other than "
                    "its resume wrote it: the report was edited before",
                )
            )
        bound[w.report] = {**bound.get(w.report, {}), **w.files}
    return bound


def _against_log(ctx: CommitContext, top: str | None, scan: LogScan) -> list[Problem]:
    """The reports in the tree `top` (None: the ref is gone) against what the log bound."""
    out: list[Problem] = []
    bound = _bound(scan, out)
    entries = ctx.repo.tree_entries(top) if top is not None else {}
    for report in sorted({*entries, *bound}):
        where = f"{REPORTS}{ctx.task}:{report}"
        if report not in bound:
            if report not in scan.reports:
                detail = "no event of the log names this report: it was added by hand"
                out.append(Problem(ctx.task, "report-unbound", where, detail))
            continue
        oid, mode = entries.get(report, ("", 0))
        files = {n: o for n, (o, _) in ctx.repo.tree_entries(oid).items()} if mode == TREE else {}
        changed = sorted(
            n for n in {*files, *bound[report]} if files.get(n) != bound[report].get(n)
        )
        if not files:
            detail = "the report is gone, though the log bound it: removed after the fact"
            out.append(Problem(ctx.task, "report-replaced", where, detail))
        elif changed:
            detail = f"{', '.join(changed)}: not what the log bound when the report was written"
            out.append(Problem(ctx.task, "report-replaced", where, detail + " (edited after)"))
    return out
