"""The facade: `git_agentckpt.open(path)` returns a Checkpointer.

The CLI, the MCP server and Python users all call this. A Checkpointer is the
task store (`store/workspace.py`: tasks, checkpoints, steps, events, restore)
plus the use cases composed on it: resume and confirm (`recovery/`), constraint
checks and trust (`contracts/`), the trigger policy (`tick.py`), sharing
(`store/share.py`) and `doctor`. The use cases take the store, never this
class, so nothing imports the facade but its callers. It returns data
(dataclasses and JSON-ready dicts) and never prints.

The use-case modules are imported when first called: every `git ckpt` call
pays Python start-up, and a `create` should not load the YAML parser or the
recovery code.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from git_agentckpt.api_paths import (  # the calls that take a path (re-exported)
    doctor,
    hooks_status,
    install_hooks,
    integrate,
    run_hook,
    uninstall_hooks,
    verify,
    verify_dir,
    verify_pushed,
)
from git_agentckpt.api_shared import SharedCalls
from git_agentckpt.errors import CkptError, OperationFailed, UsageError
from git_agentckpt.model import JSON, Event, RunInfo
from git_agentckpt.settings import CONTRACTS_DIR, SETTINGS_PATH
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import EventLike, StepNotStartable

if TYPE_CHECKING:
    from git_agentckpt.audit.export import ExportResult
    from git_agentckpt.audit.timeline import Timeline
    from git_agentckpt.contracts.engine import CheckOutcome
    from git_agentckpt.contracts.watch import WatchDiff
    from git_agentckpt.contracts.watching import Rebaselined
    from git_agentckpt.integrations.agent_hook import HookReply as AgentHookReply
    from git_agentckpt.integrations.importing import ImportResult
    from git_agentckpt.recovery.confirm import Verdict
    from git_agentckpt.recovery.flow import ResumeOutcome
    from git_agentckpt.store.restoring import RestoreResult as RestoreResult
    from git_agentckpt.store.share import ShareResult as ShareResult
    from git_agentckpt.tick import TickResult

__all__ = [
    "Checkpointer",
    "EventLike",
    "RestoreResult",
    "RunInfo",
    "StepRun",
    "doctor",
    "hooks_status",
    "install_hooks",
    "integrate",
    "run_hook",
    "uninstall_hooks",
    "verify",
    "verify_dir",
    "verify_pushed",
]


def __getattr__(name: str) -> Any:
    """`RestoreResult` on first use (restore's modules are not loaded at start-up)."""
    if name == "RestoreResult":
        from git_agentckpt.store.restoring import RestoreResult

        return RestoreResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class StepRun:
    """What `with ck.step(...) as run:` gives the block: set `outputs` (JSON) to record the
    step's outputs; `checkpoint` (done) or `error` (failed) is filled in on the way out."""

    task: str
    step: str
    started: Event  # the `step.start` event; `started.data["mode"]`: start, retry or redo
    outputs: JSON = None
    checkpoint: Checkpoint | None = None
    error: dict[str, JSON] | None = None


class Checkpointer(SharedCalls):
    """The task store of one repository, with resume, checks, the policy and sharing."""

    @classmethod
    def open(cls, path: str = ".", *, for_reading: bool = False) -> Checkpointer:
        """The repository at `path`. `for_reading`: a bare repository is opened too (a
        server's, to audit the trail where it is stored); only reads work there."""
        from git_agentckpt.git.repo import GitRepo

        return cls(GitRepo.discover(path, allow_bare=for_reading))

    # -- what the store does, with the contract and the policy taken into account -------

    def init(self) -> tuple[list[str], list[str]]:
        """The store's `init`; a sparse checkout that leaves `.agent/` out is named in
        `warnings` with the command that takes it in (snapshots hold it either way)."""
        from git_agentckpt.git.private_index import outside_sparse_checkout

        made = super().init()
        if outside_sparse_checkout(self.repo, SETTINGS_PATH):
            self.store.warn(
                ".agent/ is outside your sparse checkout: snapshots hold it all the same, but "
                "git will not check it out for you once it is committed; to keep it in, run "
                "`git sparse-checkout add .agent`"
            )
        return made

    def task_start(
        self,
        task: str,
        goal: str,
        steps: Sequence[tuple[str, str]] = (),
        constraints: Sequence[str] = (),
        run: RunInfo | None = None,
    ) -> Checkpoint:
        from git_agentckpt.contracts.validate import contract_status, require_defined

        contract = contract_status(self.repo)  # refused: malformed, or an id it lacks
        require_defined(contract, constraints)
        made = super().task_start(task, goal, steps, constraints, run)
        if os.path.isdir(os.path.join(self.repo.workdir, CONTRACTS_DIR)):
            from git_agentckpt.contracts.watching import record_watched

            with contextlib.suppress(CkptError):  # a bad contract: `check` will say so
                record_watched(self, TaskName(task))  # files no snapshot holds
        return made

    def _checks_for_create(self, assertions: Sequence[Any]) -> list[JSON]:
        """`--assert` specs (`file_exists:PATH`, …) and `{"id": …, "check": {…}}` mappings
        as check objects. A contract that does not validate is named in `warnings`: the
        checkpoint is taken all the same."""
        self._warn_on_invalid_contract()
        return parse_assertion_specs(assertions)

    def _warn_on_invalid_contract(self) -> None:
        """A malformed contract is said at once, not at the next check or resume."""
        from git_agentckpt.contracts.validate import contract_status, warning

        line = warning(contract_status(self.repo))
        if line is not None:
            self.store.warn(line)

    def step_start(
        self,
        task: str,
        step_id: str,
        force: bool = False,
        risk: str | None = None,
        pre_expensive: Callable[[], bool] | None = None,
        redo: bool = False,
    ) -> Event:
        """`step.start`; a high-risk step first gets a full `pre_expensive_step` checkpoint
        when the policy says so. Starting a done step without `redo` raises the drift
        alarm at once."""

        def policy_wants_it() -> bool:
            from git_agentckpt.tick import load_policy

            return load_policy(self).pre_expensive_step

        try:
            started = super().step_start(
                task, step_id, force, risk, pre_expensive or policy_wants_it, redo
            )
        except StepNotStartable as exc:
            if exc.status == "done":
                from git_agentckpt.contracts.drift import raise_redo_alarm

                raise_redo_alarm(self.log, TaskName(task))
            raise
        self._record_metrics(task)
        return started

    def step_done(
        self, task: str, step_id: str, outputs: JSON = None, run: RunInfo | None = None
    ) -> Checkpoint:
        """The store's `step done`; then the metrics of a resume whose window just passed
        (the task finished) are recorded."""
        made = super().step_done(task, step_id, outputs, run)
        self._record_metrics(task)
        return made

    def _record_metrics(self, task: str) -> None:
        """`recovery.metrics` for each resume whose window has passed (metrics/compute.py:
        the key-event index only, unless one is due). A step never fails for it."""
        from git_agentckpt.metrics.recording import record_due

        with contextlib.suppress(CkptError):
            record_due(self, TaskName(task))

    def metrics(self, tasks: Sequence[str] = (), window: int | None = None) -> dict[str, JSON]:
        """Recovery quality per resume and per task (`git ckpt metrics`): constraint
        violations after each resume against before its interruption, redone work, time
        and tokens to get going, the restatement's outcome, drift alarms; from the event
        log and the recovery reports alone. No tasks: every task with an event log."""
        from git_agentckpt.metrics.compute import DEFAULT_WINDOW
        from git_agentckpt.metrics.compute import metrics as compute

        return compute(self, tasks, DEFAULT_WINDOW if window is None else window)

    @contextlib.contextmanager
    def step(
        self, step_id: str, *, task: str | None = None, risk: str | None = None, force: bool = False
    ) -> Iterator[StepRun]:
        """`with ck.step("run-ablation-2", risk="high") as run:` runs the block as a step of
        `task` (default: $GIT_CKPT_TASK, then the single active task), as `git ckpt step
        start|done|fail` would: `step.start` first (a high-risk step gets the policy's
        `pre_expensive_step` checkpoint before it); when the block ends, `step.end` and the
        full checkpoint that makes the step done, with `run.outputs`. An exception logs
        `step.end` with status `failed` and `{"error": {"type", "message"}}` (redacted like
        every event), then propagates; the step can be retried. KeyboardInterrupt and
        SystemExit log nothing: the step stays in progress, and resume redoes it."""
        t = self.require_task(task).name
        run = StepRun(t, step_id, self.step_start(t, step_id, force=force, risk=risk))
        try:
            yield run
        except Exception as exc:
            run.error = {"type": type(exc).__name__, "message": str(exc)[:4000]}
            try:
                self.step_fail(t, step_id, {"error": run.error})
            except CkptError as lost:  # the block's own exception is what the caller sees
                exc.add_note(f"git ckpt: step {step_id} not marked failed: {lost.one_line()}")
            raise
        run.checkpoint = self.step_done(t, step_id, run.outputs)

    def constraints_in_force(self, task: str) -> list[str]:
        """The ids of every constraint the brief, `check`, the Stop hook and `confirm`
        enforce for `task`: its contract's (now, and at the checkpoint a recovery started
        from), then the ids its state names. A contract that does not parse is warned of,
        and only the state's ids are given."""
        from git_agentckpt.contracts.engine import load_contract
        from git_agentckpt.recovery.context import constraints_for_state

        state = self.state(task)
        try:
            contract = load_contract(self.repo.workdir)
        except CkptError as exc:
            self.store.warn(exc.one_line())
            contract = None
        return [str(c["id"]) for c in constraints_for_state(self.repo, contract, state)]

    # -- use cases ---------------------------------------------------------------------

    def tick(self, task: str | None = None, **signals: Any) -> TickResult:
        """Decide none/light/full from `signals` (`triggers.Signals` fields), take that
        checkpoint, log the decision (`trigger.decision`). Call it after each model call,
        e.g. `ck.tick(tokens_used=n, token_budget=b, calls_used=k, calls_budget=m)`, or with
        `rate_limit_remaining`, `next_step_risk`; what is not given is derived from the
        chain and the event log."""
        from git_agentckpt.tick import tick as run_tick
        from git_agentckpt.triggers import Signals

        self._warn_on_invalid_contract()  # even when nothing is due
        explicit = set(signals) - {"now"}
        signals.setdefault("now", time.time())
        try:
            given = Signals(**signals)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"bad signal: {exc}") from exc
        return run_tick(self, task, given, explicit)

    def check(self, task: str | None = None) -> CheckOutcome:
        """Run every constraint now (trusted commands only), log the outcome."""
        from git_agentckpt.contracts.engine import run_check_now

        return run_check_now(self, task)

    def pending_rebaseline(self, task: str | None = None) -> tuple[TaskName, WatchDiff]:
        """The task, and the watched files (no snapshot holds them) that appeared, went or
        changed content since its record: what `rebaseline` would accept."""
        from git_agentckpt.contracts.watching import pending_rebaseline

        return pending_rebaseline(self, task)

    def rebaseline(self, task: TaskName, shown: WatchDiff) -> Rebaselined:
        """A person's decision: the current content of the watched files becomes the
        record (exactly what they were shown, else ConflictError); logged as
        `constraint.rebaseline`. Only with a person at a terminal in this process, from
        Python as from the CLI (like `approve`)."""
        from git_agentckpt.contracts.watching import rebaseline
        from git_agentckpt.recovery.person import NeedsTerminal, stdin_is_terminal

        if not stdin_is_terminal():
            raise NeedsTerminal(
                "accepting the watched files' content needs a person at a terminal, "
                "and stdin is not one",
                hint=f"run `git ckpt check {task} --rebaseline` in a terminal",
            )
        return rebaseline(self, task, shown)

    def resume(
        self,
        task: str,
        *,
        from_checkpoint: str | None = None,
        restore: bool = False,
        accept_drift: bool = False,
        no_rollback: bool = False,
        brief_only: bool = False,
        max_brief_tokens: int | None = None,
    ) -> ResumeOutcome:
        """The five resume steps (design section 3); leaves a recovery report."""
        from git_agentckpt.recovery.flow import ResumeOptions, resume

        if restore and accept_drift:
            raise UsageError("--restore and --accept-drift exclude each other")
        options = ResumeOptions(
            from_checkpoint, restore, accept_drift, no_rollback, brief_only, max_brief_tokens
        )
        return resume(self, task, options)

    def confirm(
        self,
        task: str,
        restatement: str | None,
        by_human: bool = False,
        ask: Callable[[dict[str, JSON]], bool] | None = None,
    ) -> tuple[int, Verdict, dict[str, JSON]]:
        """Shadow confirmation: check the agent's restatement; leaves `recovering` on a pass.

        `by_human` records a person's approval instead of the check. It needs a person:
        refused (`NeedsTerminal`, exit status 2) unless stdin is a terminal, from Python
        as from the CLI. `ask`, when given, is shown what is approved (goal, constraints,
        done and next step) and must return True; False refuses (exit status 1), and
        nothing is recorded.
        """
        from git_agentckpt.recovery.confirming import confirm

        if by_human:
            from git_agentckpt.recovery.person import approval_subject, require_person

            require_person(task)
            if ask is not None and not ask(approval_subject(self, task)):
                raise OperationFailed(
                    f"not confirmed: the person declined; task {task} stays recovering",
                    hint=f"run `git ckpt resume {task}` again, or confirm with --restatement FILE",
                )
        status, verdict, result = confirm(self, task, restatement, by_human)
        return int(status), verdict, result

    def reports(self, task: str) -> list[dict[str, JSON]]:
        """The recovery reports of `task`, oldest first (summaries)."""
        from git_agentckpt.recovery.report import list_reports

        return list_reports(self.repo, TaskName(task))

    def report(self, task: str, report_id: str | None = None) -> dict[str, JSON]:
        """One recovery report (the latest when no id is given), with its Markdown."""
        from git_agentckpt.recovery.report import read_report, report_markdown

        data = read_report(self.repo, TaskName(task), report_id)
        return {**data, "markdown": report_markdown(data)}

    def timeline(self, task: str, commit_url: str | None = None) -> tuple[Timeline, str]:
        """The timeline of `task` for people (audit/timeline.py) and its self-contained
        HTML page; `commit_url`: a forge's commit page with `{commit}` in it."""
        from git_agentckpt.audit.timeline import build_timeline
        from git_agentckpt.audit.timeline_html import render

        tl = build_timeline(self, self.require_task(task).name)
        return tl, render(tl, commit_url)

    def quote_path(self, path: str) -> str:
        """A file name for text output, quoted as git quotes it (`paths.quote`), following
        the repository's `core.quotePath` (default true)."""
        from git_agentckpt.paths import quote

        if self._quote_non_ascii is None:
            self._quote_non_ascii = self.repo.config_bool("core.quotePath", True)
        return quote(path, non_ascii=self._quote_non_ascii)

    _quote_non_ascii: bool | None = None

    # -- agent integrations -----------------------------------------------------------

    def import_transcript(
        self,
        agent: str,
        path: str,
        task: str | None = None,
        dry_run: bool = False,
        shown: str | None = None,
    ) -> ImportResult:
        """A past session of `agent` (`claude-code`, `codex`) read from its transcript
        file `path` (read-only) into the task's log; records imported before are skipped.
        The task must exist (`-t`, $GIT_CKPT_TASK or the single active task)."""
        from git_agentckpt.integrations.importing import import_transcript

        t = self.require_task(task)
        return import_transcript(self, t, agent, path, shown or path, dry_run=dry_run)

    # -- audit: the trail as plain files (audit/export.py) ------------------------------

    def export(self, name: str, to: str) -> ExportResult:
        """Write task `name`'s trail (or the one checkpoint `name` names) as plain files
        into `to`, which must be new or an empty directory; deterministic."""
        from git_agentckpt.audit.export import export

        return export(self, name, to, self.settings.secret_paths)


def parse_assertion_specs(given: Sequence[Any]) -> list[JSON]:
    """`--assert` specs (`file_exists:PATH`, …) and `{id, check}` mappings as check objects."""
    if not given:
        return []  # the common case: no YAML parser, no contracts module to import
    from git_agentckpt.contracts.schema import assertion_from_spec, parse_assertions

    out: list[JSON] = [assertion_from_spec(a).to_json() for a in given if isinstance(a, str)]
    mappings = [dict(a) for a in given if not isinstance(a, str)]
    if mappings:
        out.extend(a.to_json() for a in parse_assertions(mappings, source="assertions"))
    return out


def demo(directory: str | None, *, keep: bool, echo: Callable[[str], None]) -> int:
    """The scripted research task of `git ckpt demo`, in a throwaway repository."""
    from git_agentckpt.recovery.demo import run_demo

    return run_demo(directory, keep=keep, echo=echo)


# -- what works on any repository, bare or not (a server's too) ------------------------


def hook_stdin(stream: BinaryIO) -> bytes:
    """An agent hook's stdin for `agent_hook`: read up to one byte more than a hook takes
    (`integrations/agent_hook.MAX_STDIN`), so that an endless stream is answered too."""
    from git_agentckpt.integrations.agent_hook import MAX_STDIN

    return stream.read(MAX_STDIN + 1)


def agent_hook(agent: str, event: str, stdin: bytes, path: str = ".") -> AgentHookReply:
    """One call of an agent's hook (`git ckpt hook claude-code|codex EVENT`): what to print
    on stdout, as the hook expects it. Never raises: a failure is the reply's
    `systemMessage` (integrations/agent_hook.py); each call is logged in
    `.git/agent/hooks.log`."""
    from git_agentckpt.integrations.agent_hook import answer

    return answer(lambda: Checkpointer.open(path), agent, event, stdin, os.environ)


def load_assertions_text(text: str, source: str) -> list[JSON]:
    """The assertions of a YAML or JSON file (a list of `{id, check}`) as check objects."""
    from git_agentckpt.contracts.schema import load_assertions_text as load

    return [a.to_json() for a in load(text, source)]


def person_present() -> bool:
    """Whether a person can answer at this process's terminal (trust, confirm --by-human)."""
    from git_agentckpt.recovery.person import stdin_is_terminal

    return stdin_is_terminal()
