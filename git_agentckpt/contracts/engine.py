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
  glob they are watched by size and mtime instead (`watch.py`), tracked
  secret files included; `forbidden_paths` uses the same set ("written" =
  differs from the baseline).
- `command` checks run only when this user approved that exact argv for this
  repository (`TrustStore`, identity `repo_identity`); otherwise `untrusted`,
  never executed.
- Blocking: a `block` constraint whose status is `fail` or `error` (a check
  that cannot be evaluated fails closed). `unchecked` and `untrusted` are
  counted and shown, never blocking. A `constraint.violation` event is
  written for each `fail` or `error`, whatever the severity.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from git_agentckpt.contracts import watch
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
from git_agentckpt.display import escape_for_display
from git_agentckpt.errors import CkptError, Exit, NotFound, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import agent_dir, large_files, snapshot_and_changes
from git_agentckpt.globs import match_excluded
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
    "context_drop_setting",
    "evaluate",
    "evaluate_assertions",
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
    return load_contract_dir(Path(workdir) / CONTRACTS_DIR)


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
        found = ck.resolve_task(task)
        if not ck.log.exists(found) and ck.store.tip(found) is None:
            raise NotFound(f"no task {found.name!r}", hint="see `git ckpt task list`")
        return found
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


def contract_globs(contract: Contract | None) -> list[str]:
    """The globs of the contract's `forbidden_paths` / `protected_paths` checks."""
    pairs: list[tuple[str, Sequence[str]]] = []
    for c in contract.constraints if contract is not None else ():
        paths = c.check.params.get("paths") if c.check is not None else None
        if c.check is not None and isinstance(paths, list | tuple):
            pairs.append((c.check.kind, [p for p in paths if isinstance(p, str)]))
    return watch.watched_globs(pairs)


def record_watched(ck: Workspace, task: TaskName) -> None:
    """At task start: what the directories of the contract's path globs hold now."""
    globs = contract_globs(load_contract(ck.repo.workdir))
    if globs:
        watch.record(agent_dir(ck.repo), task.name, ck.repo.workdir, globs)


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


def run_check_now(ck: Workspace, task: str | TaskName | None) -> CheckOutcome:
    """The body of `git ckpt check [TASK]` (see the module doc); returns, never prints."""
    repo = ck.repo
    contract = load_contract(repo.workdir)
    if contract is not None:
        rel = os.path.relpath(contract.path, repo.workdir)
        contract = Contract(
            rel if not rel.startswith("..") else contract.path, contract.constraints
        )
    name = task.name if isinstance(task, TaskName) else task
    t = _task_for_check(ck, name)
    baseline = _baseline(ck, t)
    base_tree = repo.read_commit(baseline).tree if baseline else repo.empty_tree()
    tree, changed = snapshot_and_changes(repo, ck.settings.secret_paths, base_tree)
    # untracked files above the size cap are not in `tree`, but they are there: they
    # count as any untracked file does (added since the baseline)
    changed = changed | {f.path for f in large_files(repo)}
    if t is not None:  # files no snapshot holds (ignored ones), under path-check globs
        secret = ck.settings.secret_paths  # a tracked one is in the tree, as HEAD's blob
        changed = changed | watch.changed_since_start(
            agent_dir(repo),
            t.name,
            repo.workdir,
            contract_globs(contract),
            lambda path: (
                not match_excluded(secret, path) and repo.tree_entry(tree, path) is not None
            ),
        )
    needs_runner = contract is not None and any(
        c.check is not None and c.check.kind == "command" for c in contract.constraints
    )
    runner = make_command_runner(repo, TrustStore(), ck.log.redactor.text) if needs_runner else None
    ctx = CheckContext(Path(repo.workdir), changed_paths=changed, command_runner=runner)
    report = evaluate(contract, ctx)
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
