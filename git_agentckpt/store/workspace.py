"""The task store: tasks, checkpoints, steps and events of one repository.

`Workspace` is what the use cases (recovery, contracts, the trigger policy)
work on, and what the facade (`api.Checkpointer`) adds their composition to:
it imports nothing above the store, so no use case depends on the facade.
It returns data (dataclasses and JSON-ready dicts) and never prints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from git_agentckpt import after_reply
from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import (
    BadStateError,
    NotFound,
    RecoveringError,
    UsageError,
)
from git_agentckpt.git import packing
from git_agentckpt.model import (
    JSON,
    REFUSED_START_EVENT,
    Event,
    NewEvent,
    RunInfo,
    check_external_event_type,
    check_external_patch,
    find_step,
    merge_update,
    new_state,
    normalize_state,
)
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.costs import record_cost
from git_agentckpt.store.pins import key_input_assertions
from git_agentckpt.store.reading import TaskReader
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import current_state
from git_agentckpt.store.tools import file_hashes, tool_versions

if TYPE_CHECKING:
    from git_agentckpt.store.restoring import RestoreResult

__all__ = ["EventLike", "RestoreResult", "StepNotStartable", "Workspace"]


def __getattr__(name: str) -> Any:
    """`RestoreResult` is imported on first use: restore's modules are not loaded by a
    command that only reads (`list`, `log`: start-up time)."""
    if name == "RestoreResult":
        from git_agentckpt.store.restoring import RestoreResult

        return RestoreResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


EventLike = NewEvent | Mapping[str, Any]
# every this many events, the loose objects are counted (and packed past PACK_AT)
EVENTS_PER_PACK_CHECK = 256
START_MODES = {"pending": "start", "in_progress": "redo", "failed": "retry"}


class StepNotStartable(UsageError):
    """`step start` of a step that is done or skipped."""

    def __init__(self, step: str, status: str) -> None:
        super().__init__(
            f"step {step!r} is {status}; only pending, in_progress or failed steps start"
        )
        self.step = step
        self.status = status


def _as_new_event(ev: EventLike) -> NewEvent:
    if isinstance(ev, NewEvent):
        return ev
    payload = dict(ev)
    type_ = payload.pop("type", None)
    if not isinstance(type_, str):
        raise BadStateError("every event needs a string 'type'")
    actor = payload.pop("actor", None)
    if isinstance(actor, str):
        return NewEvent.from_payload(type_, payload, actor)
    if isinstance(actor, dict):
        payload["actor"] = actor
    return NewEvent.from_payload(type_, payload, None)


class Workspace(TaskReader):
    """The task store of one repository: `TaskReader` plus every write (tasks, checkpoints,
    steps, events, restore)."""

    def task_start(
        self,
        task: str,
        goal: str,
        steps: Sequence[tuple[str, str]] = (),
        constraints: Sequence[str] = (),
        run: RunInfo | None = None,
    ) -> Checkpoint:
        t = TaskName(task)
        t.check_no_prefix_clash(self.tasks())
        state = new_state(t.name, goal, list(steps), list(constraints))
        if self.repo.read_ref(t.checkpoints_ref) is not None:
            raise UsageError(
                f"task {task!r} already exists", hint=f"see `git ckpt task show {task}`"
            )
        if self.log.exists(t):
            # a start cut off between its task.start event and its first checkpoint (a
            # crash): the same start completes it, a different one is refused
            logged, _ = current_state(self.store, self.log, t)
            same = logged is not None and all(
                logged.get(k) == state.get(k) for k in ("goal", "steps", "constraints")
            )
            if not same:
                raise UsageError(
                    f"task {task!r} already exists (its first checkpoint never committed)",
                    hint=f"run `git ckpt create -t {task}` to complete it as it was started",
                )
        # the task.start is logged with the first checkpoint's prepare, in one commit: a
        # start whose baseline snapshot fails leaves nothing behind, and can be run again
        return self.create(
            task=t.name, message="task start", trigger="task_start", run=run, _start=state
        )

    # -- checkpoints ------------------------------------------------------------------

    def _record_env(self, state: dict[str, JSON], light: bool, run: RunInfo | None) -> None:
        env = state.setdefault("env", {})
        assert isinstance(env, dict)
        env["tools"] = tool_versions()
        if self.settings.env_files and not light:
            env["files"] = file_hashes(self.repo.workdir, self.settings.env_files)
        if run is None:
            return
        if run.model:
            env["model"] = {"name": run.model, "version": run.model_version}
        if run.params:
            params = env.setdefault("params", {})
            assert isinstance(params, dict)
            params.update(run.params)
        if run.usage:
            usage = state.setdefault("usage", {})
            assert isinstance(usage, dict)
            usage.update(run.usage)

    def create(
        self,
        task: str | None = None,
        message: str = "",
        light: bool = False,
        trigger: str = "manual",
        step: str | None = None,
        state: Mapping[str, JSON] | None = None,
        run: RunInfo | None = None,
        force: bool = False,
        actor: str | None = None,
        assertions: Sequence[Any] = (),
        _state_override: dict[str, JSON] | None = None,
        _transform: Callable[[dict[str, JSON]], dict[str, JSON]] | None = None,
        _start: dict[str, JSON] | None = None,
        _tree: str | None = None,
        _lead: Sequence[NewEvent] = (),
        _committed: Callable[[Checkpoint], Sequence[NewEvent]] | None = None,
    ) -> Checkpoint:
        """Take a checkpoint; `state` is a patch merged into the current task state.

        `_tree` (internal: restore and resume) is the working tree already proven equal to
        the disk; a full checkpoint records it instead of snapshotting again.

        `_lead` (internal: resume's recovery events) is logged in the same commit as the
        `checkpoint.prepare`, just before it, once: a retry after a lost race logs its own
        prepare without them (they are in the log already, with the aborted one).
        `_committed` (internal: resume) runs after the commit point, its events logged
        with the `checkpoint.commit` (`CheckpointStore.create`).

        `assertions` are checked on resume (`{"id": …, "check": {…}}` objects; the facade
        also takes `--assert` specs); the key inputs (`[env] key_inputs`) are pinned too.
        """
        t = self.resolve_task(task)
        checks = [
            *self._checks_for_create(assertions),
            *key_input_assertions(self.repo.workdir, self.settings.key_inputs),
        ]

        unlogged = list(_lead)

        def compute_state() -> tuple[dict[str, JSON], list[NewEvent]]:
            """Runs under the task's lock (and again on each retry): see CheckpointStore.
            Also the events to log with the prepare: `_lead` (the first time), and the
            task.start of a new task."""
            lead: list[NewEvent] = unlogged[:]
            unlogged.clear()
            if _state_override is not None:  # resume: the state of the checkpoint it stands for
                current: dict[str, JSON] | None = json.loads(json.dumps(_state_override))
            else:
                current, _ = current_state(self.store, self.log, t)
            if _start is not None and self.repo.read_ref(t.checkpoints_ref) is not None:
                raise UsageError(f"task {t} already exists", hint=f"see `git ckpt task show {t}`")
            if current is None:  # a new task (or an agent checkpointing one nobody started)
                t.check_no_prefix_clash(self.tasks())
                current = _start if _start is not None else new_state(t.name, "", [], [])
                current["worktree"] = self.worktree
                lead.append(NewEvent("task.start", data={"state": current}))
            self._check_own(t, current)
            if current.get("status") == "recovering" and not force:
                raise RecoveringError(
                    f"task {t} is recovering: confirm the restatement first",
                    hint=f"run `git ckpt confirm {t} --restatement FILE`, or pass --force",
                )
            new = _transform(current) if _transform is not None else current
            if state:
                check_external_patch(new, state)
                new = merge_update(new, state)
            if step is not None and find_step(new, step) is None:
                raise NotFound(f"task {t} has no step {step!r}")
            new = normalize_state(json.loads(json.dumps(new)))
            self._record_env(new, light, run)
            return new, lead

        started = time.perf_counter()
        made = self.store.create(
            t,
            message=message,
            light=light,
            trigger=trigger,
            step=step,
            state=compute_state,
            secret_paths=self.settings.secret_paths,
            actor={"agent": actor} if actor else None,
            assertions=checks,
            tree=_tree,
            committed=_committed,
        )
        if not light and _tree is None:
            record_cost(self.repo, time.perf_counter() - started)
        self._pack_objects()
        return made

    def _pack_objects(self) -> None:
        """After the commit point, outside the task's lock: this checkpoint's loose objects
        (and the events' since the last one) go into one pack (`git/packing.py`); in the
        daemon after the caller has its answer (`after_reply.py`). The checkpoint is
        committed already: a failure leaves the objects loose, nothing more."""
        if not packing.enabled(self.repo):
            return
        repo = self.repo
        after_reply.later(lambda: packing.pack_loose(repo))

    def _checks_for_create(self, assertions: Sequence[Any]) -> list[JSON]:
        """The assertions `create` stores: check objects as given (the facade also parses
        `--assert` specs and warns about a contract that does not validate)."""
        return list(assertions)

    # -- steps ------------------------------------------------------------------------

    def step_start(
        self,
        task: str,
        step_id: str,
        force: bool = False,
        risk: str | None = None,
        pre_expensive: Callable[[], bool] = lambda: True,
    ) -> Event:
        """`step.start`; a high-risk step first gets a full `pre_expensive_step` checkpoint
        (when `pre_expensive()` says the policy wants one). A done or skipped step raises
        `StepNotStartable` after its refusal is logged."""
        t = TaskName(task)
        state = self.require_own(t)
        if state.get("status") == "recovering" and not force:
            raise RecoveringError(
                f"task {t} is recovering: confirm the restatement first",
                hint=f"run `git ckpt confirm {t} --restatement FILE`, or pass --force",
            )
        step = find_step(state, step_id)
        if step is None:
            raise NotFound(f"task {t} has no step {step_id!r}")
        status = step["status"]
        if status not in START_MODES:
            self.log.append(
                t,
                [NewEvent(REFUSED_START_EVENT, links={"step": step_id}, data={"status": status})],
            )
            raise StepNotStartable(step_id, str(status))
        risk = risk or (str(step["risk"]) if step.get("risk") else None)
        data: dict[str, JSON] = {"mode": START_MODES[str(status)]}
        if risk:
            data["risk"] = risk
        if risk == "high" and pre_expensive():
            pre = self.create(
                t.name,
                message=f"before high-risk step {step_id}",
                trigger="pre_expensive_step",
                step=step_id,
                force=force,
            )
            data["checkpoint"] = pre.commit
        return self.log.append(t, [NewEvent("step.start", links={"step": step_id}, data=data)])[0]

    def step_done(
        self, task: str, step_id: str, outputs: JSON = None, run: RunInfo | None = None
    ) -> Checkpoint:
        """`step.end`, then the full checkpoint whose note marks the step done."""
        t = TaskName(task)
        state = self.require_own(t)
        step = find_step(state, step_id)
        if step is None:
            raise NotFound(f"task {t} has no step {step_id!r}")
        if step["status"] not in ("in_progress", "pending", "failed"):
            raise UsageError(f"step {step_id!r} is {step['status']}, it cannot be done again")
        self.log.append(
            t,
            [
                NewEvent(
                    "step.end", links={"step": step_id}, data={"status": "done", "outputs": outputs}
                )
            ],
        )
        crash_point("step.end")

        def mark_done(current: dict[str, JSON]) -> dict[str, JSON]:
            done = find_step(current, step_id)
            if done is None:  # cannot happen: steps are never removed
                raise NotFound(f"task {t} has no step {step_id!r}")
            done["status"] = "done"
            done["outputs"] = outputs
            if current.get("current_step") == step_id:
                current["current_step"] = None
            steps = [s for s in current.get("steps") or [] if isinstance(s, dict)]
            if all(s.get("status") in ("done", "skipped") for s in steps):
                current["status"] = "done"
            return current

        return self.create(
            task=t.name,
            message=f"step {step_id} done",
            trigger="step_end",
            step=step_id,
            run=run,
            force=True,
            _transform=mark_done,
        )

    def step_fail(self, task: str, step_id: str, outputs: JSON = None) -> Event:
        t = TaskName(task)
        state = self.require_own(t)
        if find_step(state, step_id) is None:
            raise NotFound(f"task {t} has no step {step_id!r}")
        return self.log.append(
            t,
            [
                NewEvent(
                    "step.end",
                    links={"step": step_id},
                    data={"status": "failed", "outputs": outputs},
                )
            ],
        )[0]

    # -- events -----------------------------------------------------------------------

    def append_events(self, task: str, events: Sequence[EventLike]) -> list[Event]:
        """Append a batch of events in one commit (one compare-and-swap).

        Types that change state or prove the write-ahead order (`task.*`,
        `step.*`, `checkpoint.*`, `recovery.*`, …) are refused: the tool writes them.
        """
        batch = [_as_new_event(e) for e in events]
        for ev in batch:
            check_external_event_type(ev.type)
        written = self.log.append(TaskName(task), batch)
        if any(e.seq % EVENTS_PER_PACK_CHECK == 0 for e in written):
            self._pack_objects()  # a task that logs without checkpointing: bounded too
        return written

    def event(
        self,
        task: str,
        type_: str,
        payload: Mapping[str, JSON] | None = None,
        actor: str | None = None,
    ) -> Event:
        return self.append_events(task, [NewEvent.from_payload(type_, payload or {}, actor)])[0]

    def restore(self, name: str, dry_run: bool = False) -> RestoreResult:
        from git_agentckpt.store.restoring import restore_checkpoint  # not at start-up

        """Bring the working tree to checkpoint `name` (a safety checkpoint first)."""
        return restore_checkpoint(self, name, dry_run)
