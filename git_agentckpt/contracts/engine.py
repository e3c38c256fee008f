"""Run the contract now: `git ckpt check`, assertions for resume, key-input assertions.

- Constraints come from `.agent/contracts/constraints.{yaml,yml,json}`; a file
  that cannot be parsed raises `ContractError` (exit 2): nothing ever runs
  without its constraints.
- Changed paths are those between the task's baseline tree (the `Baseline`
  of its tip checkpoint; HEAD when no task is known or it has no checkpoint;
  the empty tree on an unborn branch) and the working tree as a snapshot
  would see it (tracked + untracked-not-ignored, minus `secret_paths`, whose
  tracked files keep HEAD's blob), written through the private index without
  a checkpoint. Ignored and secret files are therefore invisible to that
  comparison; under the directory of a `protected_paths` / `forbidden_paths`
  glob they are watched by content instead (`watch.py`: stamps first, the
  sha256 when a stamp moved), tracked secret files included; `forbidden_paths`
  uses the same set ("written" = differs from the baseline).
- `command` checks run only when this user approved that exact argv for this
  repository (`TrustStore`, identity `repo_identity`); otherwise `untrusted`,
  never executed.
- Blocking: a `block` constraint whose status is `fail` or `error` (a check
  that cannot be evaluated fails closed). `unchecked` and `untrusted` are
  counted and shown, never blocking. A `constraint.violation` event is
  written for each `fail` or `error`, whatever the severity.
- At resume, `evaluate_for_resume` runs the same checks and logs nothing: the
  resume records the run itself (see `ConstraintRun`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from git_agentckpt.contracts.checks import CheckContext, CheckResult, Status, run_check
from git_agentckpt.contracts.drift import (
    CHECK_EVENT,
    DEFAULT_CONTEXT_DROP,
    DriftSignal,
    drift_events,
    recommendation,
    scan_drift,
)
from git_agentckpt.contracts.runner import command_check_result, run_command
from git_agentckpt.contracts.schema import (
    DEFAULT_COMMAND_TIMEOUT,
    Assertion,
    Check,
    Contract,
    ContractError,
    Severity,
    load_contract_dir,
    parse_assertions,
)
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.contracts.watching import watched_changes
from git_agentckpt.display import escape_for_display
from git_agentckpt.errors import CkptError, Exit, NotFound, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import changed_paths, large_files, snapshot_unless_unchanged
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.settings import CONTRACTS_DIR, Settings
from git_agentckpt.store.pins import key_input_assertions
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

__all__ = [
    "STATUSES",
    "AssertionResult",
    "CheckOutcome",
    "ConstraintReport",
    "ConstraintResult",
    "ConstraintRun",
    "context_drop_setting",
    "evaluate",
    "evaluate_assertions",
    "evaluate_for_resume",
    "key_input_assertions",
    "load_contract",
    "make_command_runner",
    "repo_identity",
    "run_check_now",
]

STATUSES: tuple[Status, ...] = ("pass", "fail", "error", "unchecked", "untrusted")
FAILING: tuple[Status, ...] = ("fail", "error")
CommandRunner = Callable[[Check], CheckResult]


def repo_identity(repo: GitRepo) -> str:
    """What trust approvals are bound to: the absolute, resolved git common dir
    (shared by the worktrees of one clone, different in another clone)."""
    return os.path.realpath(repo.common_dir)


def make_command_runner(
    repo: GitRepo, trust: TrustStore, redact: Callable[[str], str]
) -> CommandRunner:
    """Run a `command` check in the working tree when trusted; else `untrusted`, never run."""
    repo_id = repo_identity(repo)

    def run(check: Check) -> CheckResult:
        words = command_argv(check)
        if not words:
            return CheckResult("error", "malformed check: 'argv' must be a non-empty list")
        try:
            trusted = trust.is_trusted(repo_id, words)
        except CkptError as exc:  # an unreadable trust store: fail closed
            return CheckResult("error", f"not run: {exc.one_line()}")
        if not trusted:
            return CheckResult(
                "untrusted",
                f"not run: command not approved by this user in this clone: "
                f"{escape_for_display(words)} (review it with git ckpt trust)",
            )
        timeout = command_timeout(check)
        outcome = run_command(words, cwd=Path(repo.workdir), timeout=timeout, redact=redact)
        return command_check_result(outcome, words)

    return run


def command_argv(check: Check) -> tuple[str, ...]:
    argv = check.params.get("argv")
    if not isinstance(argv, list | tuple):
        return ()
    return tuple(str(word) for word in argv)


def command_timeout(check: Check) -> float:
    value = check.params.get("timeout", DEFAULT_COMMAND_TIMEOUT)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else DEFAULT_COMMAND_TIMEOUT  # type: ignore[arg-type]


# ---- reports ------------------------------------------------------------------


@dataclass(frozen=True)
class ConstraintResult:
    id: str
    text: str
    severity: Severity
    status: Status
    detail: str
    kind: str | None = None
    line: int | None = None

    @property
    def blocking(self) -> bool:
        return self.severity == "block" and self.status in FAILING

    def to_json(self) -> dict[str, JSON]:
        return asdict(self)


@dataclass(frozen=True)
class ConstraintReport:
    contract: str | None  # the contract file, None when there is none
    results: tuple[ConstraintResult, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for result in self.results:
            counts[result.status] += 1
        return counts

    @property
    def blocking_failures(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.results if r.blocking)

    @property
    def statuses(self) -> dict[str, str]:
        return {r.id: r.status for r in self.results}

    def to_json(self) -> dict[str, JSON]:
        return {
            "contract": self.contract,
            "constraints": [r.to_json() for r in self.results],
            "counts": dict(self.counts),
            "blocking_failures": list(self.blocking_failures),
        }


def evaluate(contract: Contract | None, ctx: CheckContext) -> ConstraintReport:
    """Evaluate every constraint in order (no contract: an empty report)."""
    if contract is None:
        return ConstraintReport(None)
    results = []
    for c in contract.constraints:
        result = run_check(c.check, ctx)
        kind = c.check.kind if c.check is not None else None
        results.append(
            ConstraintResult(c.id, c.text, c.severity, result.status, result.detail, kind, c.line)
        )
    return ConstraintReport(contract.path, tuple(results))


@dataclass(frozen=True)
class AssertionResult:
    id: str
    text: str
    kind: str | None
    status: Status
    detail: str

    def to_json(self) -> dict[str, JSON]:
        return asdict(self)


def evaluate_assertions(
    assertions: Sequence[Assertion | Mapping[str, object]], ctx: CheckContext
) -> list[AssertionResult]:
    """Evaluate assertions (parsed, or raw items of the assertions note). A raw
    item that does not validate is an `error` result naming what is wrong; the
    others still run."""
    out: list[AssertionResult] = []
    for index, item in enumerate(assertions):
        if not isinstance(item, Assertion):
            try:
                (item,) = parse_assertions([dict(item)], source=f"assertion {index + 1}")
            except (ContractError, TypeError, ValueError) as exc:
                raw_id = item.get("id") if isinstance(item, Mapping) else None
                ident = raw_id if isinstance(raw_id, str) else f"#{index + 1}"
                why = exc.one_line() if isinstance(exc, ContractError) else str(exc)
                out.append(AssertionResult(ident, "", None, "error", why))
                continue
        result = run_check(item.check, ctx)
        out.append(
            AssertionResult(item.id, item.text, item.check.kind, result.status, result.detail)
        )
    return out


# ---- git ckpt check -----------------------------------------------------------


def load_contract(workdir: str) -> Contract | None:
    """The contract of the working tree (None when there is no contract file)."""
    return load_contract_dir(Path(workdir) / CONTRACTS_DIR, shown_as=CONTRACTS_DIR)


def context_drop_setting(settings: Settings) -> float:
    """`[drift] context_drop` of `.agent/ckpt.toml` (a share in (0, 1), default 0.5)."""
    value = settings.table("drift").get("context_drop", DEFAULT_CONTEXT_DROP)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise UsageError(
            f".agent/ckpt.toml: [drift] context_drop must be a number between 0 and 1, "
            f"not {value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class CheckOutcome:
    report: ConstraintReport
    task: str | None  # None: no task known, nothing was logged
    baseline: str | None  # the commit compared against (None: the empty tree)
    tree: str  # the working tree now
    changed: int  # number of changed paths
    drift: tuple[DriftSignal, ...] = ()
    events: tuple[str, ...] = field(default=())  # ids of the events written

    @property
    def exit_status(self) -> int:
        return int(Exit.FAILED) if self.report.blocking_failures else int(Exit.OK)

    @property
    def recommendation(self) -> str | None:
        return recommendation(self.task) if self.drift and self.task else None

    def to_json(self) -> dict[str, JSON]:
        return {
            **self.report.to_json(),
            "task": self.task,
            "baseline": self.baseline,
            "tree": self.tree,
            "changed_files": self.changed,
            "drift": [s.to_json(self.task) for s in self.drift],
            "recommendation": self.recommendation,
            "events": list(self.events),
            "exit": self.exit_status,
        }


def _task_for_check(ck: Workspace, task: str | None) -> TaskName | None:
    """-t/TASK, $GIT_CKPT_TASK or the single active task; None when there is no task."""
    if task or os.environ.get("GIT_CKPT_TASK"):
        named = ck.require_task(task)  # an unknown name: "did you mean", never a new task
        ck.require_own(named)  # this worktree's files never count for another's task
        return named
    try:
        return ck.resolve_task(None)
    except UsageError:
        if _active_tasks(ck):
            raise  # several active tasks: say which
        return None


def _active_tasks(ck: Workspace) -> list[TaskName]:
    out = []
    for t in ck.tasks():
        try:
            status = ck.state(t).get("status")
        except NotFound:
            continue
        if status in ("active", "recovering"):
            out.append(t)
    return out


def _baseline(ck: Workspace, task: TaskName | None) -> str | None:
    tip = ck.store.tip(task) if task is not None else None
    return tip.baseline if tip is not None else ck.repo.head()


def _check_events(
    outcome: ConstraintReport, baseline: str | None, tree: str, changed: int, carry: JSON
) -> list[NewEvent]:
    counts = outcome.counts
    summary = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    blocking = outcome.blocking_failures
    data: dict[str, JSON] = {
        "message": (summary or "no constraints")
        + (f"; blocking: {', '.join(blocking)}" if blocking else ""),
        "contract": outcome.contract,
        "counts": dict(counts),
        # a list, not {id: status}: the redactor would hide the value of an id like `api_key`
        "constraints": [{"id": r.id, "status": r.status} for r in outcome.results],
        "blocking_failures": list(blocking),
        "baseline": baseline,
        "tree": tree,
        "changed_files": changed,
        "drift": carry,
    }
    events = [NewEvent(CHECK_EVENT, data=data)]
    for r in outcome.results:
        if r.status in FAILING:
            violation: dict[str, JSON] = {
                "constraint": r.id,
                "text": r.text,
                "severity": r.severity,
                "status": r.status,
                "detail": r.detail,
                "message": f"{r.id} ({r.severity}): {r.status}",
            }
            events.append(NewEvent("constraint.violation", data=violation))
    return events


def _changed_paths(
    ck: Workspace,
    t: TaskName | None,
    contract: Contract | None,
    base_tree: str,
    scanned: str | None = None,
) -> tuple[str, frozenset[str]]:
    """The working tree as a snapshot would see it, and the paths changed since
    `base_tree`: the snapshot comparison, untracked large files, and (with a task)
    the watched files no snapshot holds. When nothing changed since the last snapshot,
    its tree is used as it is (`snapshot_unless_unchanged`: no `add -A`); `scanned` is
    a snapshot the caller took a moment ago (the `Stop` hook's checkpoint): used as it is."""
    repo = ck.repo
    if scanned is not None:
        tree, changed = scanned, changed_paths(repo, base_tree, scanned)
    else:
        tree, changed, _ = snapshot_unless_unchanged(repo, ck.settings.secret_paths, base_tree)
    # untracked files above the size cap are not in `tree`, but they are there: they
    # count as any untracked file does (added since the baseline)
    changed = changed | {f.path for f in large_files(repo)}
    if t is not None:
        changed |= watched_changes(ck, t, contract, tree)
    return tree, frozenset(changed)


def _relative(contract: Contract | None, workdir: str) -> Contract | None:
    if contract is None:
        return None
    rel = os.path.relpath(contract.path, workdir)
    return Contract(rel if not rel.startswith("..") else contract.path, contract.constraints)


def _context(ck: Workspace, contract: Contract | None, changed: frozenset[str]) -> CheckContext:
    """Declarative checks read the working tree; commands run only when trusted."""
    repo = ck.repo
    needs_runner = contract is not None and any(
        c.check is not None and c.check.kind == "command" for c in contract.constraints
    )
    runner = make_command_runner(repo, TrustStore(), ck.log.redactor.text) if needs_runner else None
    return CheckContext(Path(repo.workdir), changed_paths=changed, command_runner=runner)


def run_check_now(
    ck: Workspace, task: str | TaskName | None, scanned: str | None = None
) -> CheckOutcome:
    """The body of `git ckpt check [TASK]` (see the module doc); returns, never prints.
    `scanned`: the tree of a full snapshot taken just before (no second scan)."""
    repo = ck.repo
    contract = _relative(load_contract(repo.workdir), repo.workdir)
    name = task.name if isinstance(task, TaskName) else task
    t = _task_for_check(ck, name)
    baseline = _baseline(ck, t)
    base_tree = repo.read_commit(baseline).tree if baseline else repo.empty_tree()
    tree, changed = _changed_paths(ck, t, contract, base_tree, scanned)
    report = evaluate(contract, _context(ck, contract, changed))
    if t is None:
        return CheckOutcome(report, None, baseline, tree, len(changed))
    scan = scan_drift(
        ck.log,
        t,
        current=report.statuses,
        context_drop=context_drop_setting(ck.settings),
        store=ck.store,
    )
    events = _check_events(report, baseline, tree, len(changed), scan.carry)
    written = ck.log.append(t, [*events, *drift_events(t, scan.signals)])
    return CheckOutcome(
        report, t.name, baseline, tree, len(changed), scan.signals, tuple(e.id for e in written)
    )


# ---- resume, step 3: every constraint, nothing logged ---------------------------------


@dataclass(frozen=True)
class ConstraintRun:
    """Every constraint of the contract, run at resume time (design section 3, step 3).

    `ready` is False when a `block` constraint fails (`fail`, or `error`: a check
    that cannot be evaluated fails closed); the resume is then not ready
    (`Exit.NOT_READY`). `untrusted` and `unchecked` constraints are listed, never
    blocking, exactly as `git ckpt check` treats them.
    """

    report: ConstraintReport
    baseline: str | None  # the commit the changed paths are counted from (None: empty tree)
    tree: str  # the tree the workspace was compared as
    changed: int  # number of changed paths

    @property
    def results(self) -> tuple[ConstraintResult, ...]:
        return self.report.results

    @property
    def failing(self) -> tuple[ConstraintResult, ...]:
        return tuple(r for r in self.report.results if r.status in FAILING)

    @property
    def blocking(self) -> tuple[str, ...]:
        return self.report.blocking_failures

    @property
    def ready(self) -> bool:
        return not self.blocking

    @property
    def exit_status(self) -> Exit:
        return Exit.OK if self.ready else Exit.NOT_READY

    def to_json(self) -> dict[str, JSON]:
        return {
            "contract": self.report.contract,
            "constraints": [
                {"id": r.id, "severity": r.severity, "status": r.status, "detail": r.detail}
                for r in self.report.results
            ],
            "failing": [r.id for r in self.failing],
            "blocking": list(self.blocking),
            "ready": self.ready,
            "counts": dict(self.report.counts),
            "baseline": self.baseline,
            "tree": self.tree,
            "changed_files": self.changed,
        }


def evaluate_for_resume(ck: Workspace, task: TaskName, tree: str) -> ConstraintRun:
    """Run every constraint of the working tree's contract for a resume of `task`
    whose workspace is (now) `tree`: trusted commands only, the same checks as
    `git ckpt check`. Changed paths are those between the task's baseline and
    `tree`, plus untracked large files and the watched files no snapshot holds.

    Nothing is logged and no drift alarm is raised: the resume records this run in
    its own report and `recovery.*` events (a `constraint.check` here would count
    the tool's own verification as a step of the agent's work for the drift scan).
    The watched-file record's stamps are refreshed (a cache, not a decision).
    A contract that cannot be parsed raises `ContractError` (exit 2): a resume never
    runs without its constraints.
    """
    repo = ck.repo
    contract = _relative(load_contract(repo.workdir), repo.workdir)
    baseline = _baseline(ck, task)
    base_tree = repo.read_commit(baseline).tree if baseline else repo.empty_tree()
    changed = set(changed_paths(repo, base_tree, tree))
    changed |= {f.path for f in large_files(repo)}
    changed |= watched_changes(ck, task, contract, tree)
    report = evaluate(contract, _context(ck, contract, frozenset(changed)))
    return ConstraintRun(report, baseline, tree, len(changed))
