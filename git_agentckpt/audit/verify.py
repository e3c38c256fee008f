"""`git ckpt verify`: check a trail end to end and name each problem.

Per task: the event log (`events_check`), the checkpoint chain against it
(`chain_check`), the notes (`notes_check`), the state claims, the recovery
reports (`reports_check`), the signatures. Then the store against the copies
kept elsewhere (`remote_check`): the fetch mirrors, `--against REMOTE`, the
witness file. A task that those copies, its reports ref or the state notes
still know is walked too, and one whose checkpoint and event refs are gone is
`task-missing`. One task's damage never stops the others: whatever escapes a
check is one `unreadable` problem.

`tips` overrides the refs the store holds ({ref: new value, None: deleted}):
a pre-receive hook verifies what a push *would* make the refs, objects read
from git's quarantine (`GitRepo.add_object_dirs_from_env`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from git_agentckpt.audit import (
    chain_check,
    notes_check,
    remote_check,
    reports_check,
    signatures,
    witness,
)
from git_agentckpt.audit.events_check import scan_log
from git_agentckpt.audit.per_commit import CommitContext
from git_agentckpt.audit.problems import Problem, VerifyReport, read_error_kind
from git_agentckpt.audit.replaced import REPLACE, TRAIL, replacement_problems
from git_agentckpt.errors import CkptError, NotFound
from git_agentckpt.git.audit_read import first_parent_chain, ls_remote, read_raw_commit
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON
from git_agentckpt.store.refs import ASSERTION_NOTES, CHECKPOINTS, EVENTS, REPORTS, STATE_NOTES
from git_agentckpt.store.share import MIRROR

MAX_PER_KIND = 20  # lines of one kind for one task; the rest are counted in one line


@dataclass
class RefView:
    """The refs as the store holds them, or as `tips` would make them."""

    repo: GitRepo
    tips: Mapping[str, str | None] = field(default_factory=dict)

    def value(self, ref: str) -> str | None:
        if ref in self.tips:
            return self.tips[ref]
        return self.repo.read_ref(ref)

    def names(self, prefix: str) -> list[str]:
        found = set(self.repo.list_refs(prefix))
        found |= {r for r in self.tips if r.startswith(prefix)}
        return sorted(r for r in found if self.value(r) is not None)


def _tasks(refs: RefView) -> list[str]:
    names = {r[len(CHECKPOINTS) :] for r in refs.names(CHECKPOINTS)}
    names |= {r[len(EVENTS) :] for r in refs.names(EVENTS)}
    return sorted(names)


def _tree_of(repo: GitRepo, tip: str | None, ref: str, report: VerifyReport) -> str | None:
    if tip is None:
        return None
    commit = read_raw_commit(repo, tip)
    if commit.error is not None:
        kind = read_error_kind(commit.error)
        report.add([Problem(None, kind, ref, f"its commit {tip[:12]}: {commit.error}")])
        return None
    if not commit.intact:
        report.add([Problem(None, "object-corrupt", ref, f"{tip[:12]} does not hash to its id")])
    return commit.tree


def _mirror_reach(repo: GitRepo, task: str) -> Callable[[str], bool]:
    """Whether a commit is on a fetched mirror's chain of `task` (read when first asked)."""
    chains: list[set[str]] = []

    def reach(commit: str) -> bool:
        if not chains:
            seen: set[str] = set()
            for name, tip in repo.list_refs(MIRROR).items():
                if name.endswith("/agent/checkpoints/" + task):
                    seen |= {c.id for c in first_parent_chain(repo, tip) if c.error is None}
            chains.append(seen)
        return commit in chains[0]

    return reach


def _verify_task(
    repo: GitRepo,
    refs: RefView,
    task: str,
    notes: tuple[str | None, str | None],
    report: VerifyReport,
) -> tuple[int, set[str]]:
    """Check one task; returns its log's highest event number and its checkpoint commits."""
    ctx = CommitContext(repo, task)
    events_tip = refs.value(EVENTS + task)
    scan = scan_log(ctx, events_tip)
    report.add(scan.problems)
    report.count("event commits", scan.commits)
    report.count("events", scan.events)
    tip = refs.value(CHECKPOINTS + task)
    walk = (
        chain_check.walk_chain(ctx, tip) if tip is not None else chain_check.ChainWalk(task, [], [])
    )
    report.count("checkpoints", len(walk.links))
    missing = chain_check.check_links(ctx, walk, scan)
    report.count("missing objects", missing)
    done = notes_check.check_notes(ctx, walk, scan.prepare_data, *notes)
    chain_check.check_claims(walk, scan, done)
    chain_check.check_committed(ctx, walk, scan, tip, _mirror_reach(repo, task))
    report.add(walk.problems)
    reports_tip = refs.value(REPORTS + task)
    problems, read = reports_check.check_reports(ctx, reports_tip, scan)
    report.add(problems)
    if read:
        report.count("report commits", read)
    signed = [lk.commit.id for lk in reversed(walk.links) if lk.commit.error is None]
    trail = signatures.Trail(task, signed, events_tip, reports_tip, scan.prepared_in)
    problems, good = signatures.verify_problems(repo, trail)
    report.add(problems)
    if good:
        report.count("good signatures", good)
    return scan.last_seq, {lk.commit.id for lk in walk.links}


def _capped(problems: list[Problem]) -> list[Problem]:
    out: list[Problem] = []
    counts: dict[tuple[str | None, str], int] = {}
    for p in problems:
        key = (p.task, p.kind)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] <= MAX_PER_KIND:
            out.append(p)
    for (task, kind), n in counts.items():
        if n > MAX_PER_KIND:
            more = n - MAX_PER_KIND
            sev = max((p.severity for p in problems if (p.task, p.kind) == (task, kind)), key=_rank)
            out.append(Problem(task, kind, "…", f"{more} more problem(s) of this kind", sev))
    return out


def _rank(severity: str) -> int:
    return {"info": 0, "warning": 1, "error": 2}.get(severity, 2)


@dataclass
class Copies:
    """What copies kept elsewhere say the refs held: {source: {ref: tip}}, how each is
    compared, the witness file's entries, and the sources `verify` lists."""

    tips: dict[str, dict[str, str]] = field(default_factory=dict)
    lenient: set[str] = field(default_factory=set)  # may diverge: another clone wrote it
    behind: set[str] = field(default_factory=set)  # may be ahead of this store
    witnessed: dict[str, dict[str, JSON]] | None = None
    listed: list[str] = field(default_factory=list)

    def tasks(self) -> dict[str, list[str]]:
        """{task: the sources that hold a ref of it}."""
        out: dict[str, list[str]] = {}
        for source, tips in self.tips.items():
            for task in dict.fromkeys(t for r in tips if (t := remote_check.task_of(r))):
                out.setdefault(task, []).append(source)
        return out


def _copies(repo: GitRepo, against: str | None, witness_file: str | None) -> Copies:
    """The fetch mirrors, `against`'s refs and the witness file (`""`: not read)."""
    copies = Copies()
    for key, tips in sorted(remote_check.mirrored_tips(repo).items()):
        source = f"the copy last fetched from or pushed to {key}"
        copies.tips[source] = tips
        copies.lenient.add(source)
    if against is not None:
        source = f"remote {against}"
        copies.tips[source] = ls_remote(repo, against)
        copies.lenient.add(source)
        copies.behind.add(source)
        copies.listed.append(source)
    path = witness.witness_path(repo, witness_file) if witness_file != "" else None
    copies.witnessed = witness.load(path) if path is not None else None
    if path is not None and copies.witnessed is not None:
        copies.tips["the witness file"] = {r: str(e["tip"]) for r, e in copies.witnessed.items()}
        copies.listed.append(f"witness {path}")
    return copies


def verify_trail(
    repo: GitRepo,
    tasks: Iterable[str] | None = None,
    *,
    tips: Mapping[str, str | None] | None = None,
    against: str | None = None,
    witness_file: str | None = None,
    use_witness: bool = True,
) -> VerifyReport:
    refs = RefView(repo, dict(tips or {}))
    local = _tasks(refs)
    copies = _copies(repo, against, witness_file if use_witness else "")
    known = _known(refs, copies) if tips is None else {}
    chosen = list(dict.fromkeys(tasks or []))
    unknown = [t for t in chosen if t not in local and t not in known]
    if unknown:
        raise NotFound(
            f"unknown task {unknown[0]!r}", hint="see `git ckpt task list` for the tasks here"
        )
    report = VerifyReport(tasks=chosen or sorted({*local, *known}), sources=copies.listed)
    notes = (
        _tree_of(repo, refs.value(STATE_NOTES), STATE_NOTES, report),
        _tree_of(repo, refs.value(ASSERTION_NOTES), ASSERTION_NOTES, report),
    )
    last_seq: dict[str, int] = {}
    covered: set[str] = set()
    for task in report.tasks:
        try:
            last_seq[task], walked = _verify_task(repo, refs, task, notes, report)
            covered |= walked
        except Exception as exc:  # hostile records: one line, then the next task
            text = exc.one_line() if isinstance(exc, CkptError) else f"{type(exc).__name__}: {exc}"
            report.add([Problem(task, "unreadable", CHECKPOINTS + task, text[:200])])
    if tips is None and not chosen:  # state notes of checkpoints that no chain holds
        for task, n in notes_check.orphan_tasks(repo, notes[0], covered).items():
            if task not in local:
                known.setdefault(task, []).append(f"{n} state note(s)")
                report.tasks += [] if task in report.tasks else [task]
    report.add(_missing(known, set(local), set(report.tasks), copies.behind))
    _check_replacements(repo, refs, report)
    _compare_copies(repo, refs, report, last_seq, copies)
    report.problems = _capped(report.problems)
    return report


def _known(refs: RefView, copies: Copies) -> dict[str, list[str]]:
    """The tasks known beside their checkpoint and event refs: {task: who knows it}."""
    known = copies.tasks()
    for ref in refs.names(REPORTS):
        known.setdefault(ref[len(REPORTS) :], []).append("its recovery reports ref")
    return known


def _missing(
    known: dict[str, list[str]], local: set[str], chosen: set[str], behind: set[str]
) -> list[Problem]:
    """A task whose checkpoint and event refs are gone while something still knows it."""
    out: list[Problem] = []
    for task, where in sorted(known.items()):
        if task in local or task not in chosen:
            continue
        detail = f"the task's checkpoint and event refs are gone, but {', '.join(where)} "
        detail += "still hold(s) it: the task was deleted, or this store rolled back"
        if behind & set(where):
            detail += " (or never fetched it: `git ckpt fetch` brings it)"
        out.append(Problem(task, "task-missing", CHECKPOINTS + task, detail))
    return out


def _check_replacements(repo: GitRepo, refs: RefView, report: VerifyReport) -> None:
    """`refs/replace/*` refs that make plain git show something else than a record."""
    replacements = {r: v for r in refs.names(REPLACE) if (v := refs.value(r)) is not None}
    if replacements:
        trail = {r: v for p in TRAIL for r in refs.names(p) if (v := refs.value(r)) is not None}
        report.add(replacement_problems(repo, trail, replacements))


def _compare_copies(
    repo: GitRepo, refs: RefView, report: VerifyReport, last_seq: dict[str, int], copies: Copies
) -> None:
    selected = set(report.tasks)

    def keep(task: str | None) -> bool:
        return task is None or task in selected

    for source, tips in copies.tips.items():
        lenient, behind = source in copies.lenient, source in copies.behind
        report.add(
            remote_check.compare(
                repo, refs.value, tips, source, keep=keep, diverge_ok=lenient, behind_hint=behind
            )
        )
    if copies.witnessed is not None:
        report.add(remote_check.compare_seq(copies.witnessed, last_seq, "the witness file"))


def verify_tips(repo: GitRepo, tips: Mapping[str, str | None]) -> VerifyReport:
    """The trail as `tips` ({ref: new value, None: deleted}, e.g. a push's) would leave it:
    the tasks whose refs they name (every task when only notes move; none when no agent ref
    does). The witness file is not read. The caller adds quarantined objects first
    (`GitRepo.add_object_dirs_from_env`)."""
    if not any(ref.startswith(remote_check.AUDITED) for ref in tips):
        return VerifyReport()
    refs = RefView(repo, dict(tips))
    touched = sorted({t for ref in tips if (t := remote_check.task_of(ref)) is not None})
    remaining = set(_tasks(refs))
    tasks = [t for t in touched if t in remaining]
    if touched and not tasks:  # only deletions of tasks: nothing left to verify
        return VerifyReport()
    return verify_trail(repo, tasks, tips=tips, use_witness=False)
