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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from git_agentckpt import after_reply
from git_agentckpt.errors import BadStateError, NotFound, RecoveringError, UsageError
from git_agentckpt.git import packing
from git_agentckpt.git.ref_moves import retry_cas
from git_agentckpt.git.ref_txn import RefMove
from git_agentckpt.lifecycle import NEW, MoveRefused, not_ready, step_move, task_move
from git_agentckpt.model import (
    JSON,
    REFUSED_START_EVENT,
    START_MOVES,
    STATE_EVENTS,
    Event,
    NewEvent,
    RunInfo,
    apply_event,
    check_external_event_type,
    check_external_patch,
    find_step,
    merge_update,
    new_state,
    normalize_state,
)
from git_agentckpt.store.checkpoints import (
    RESUME_TRIGGER,
    SAFETY_TRIGGER,
    Checkpoint,
    Draft,
    Extra,
    Plan,
    computed_moves,
)
from git_agentckpt.store.costs import record_cost
from git_agentckpt.store.pins import key_input_assertions
from git_agentckpt.store.reading import TaskReader
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import TaskView, read_task
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
Decide = Callable[[TaskView], tuple[dict[str, JSON], list[NewEvent]]]
# every this many events, the loose objects are counted (and packed past PACK_AT)
EVENTS_PER_PACK_CHECK = 256
REDONE = ("done", "skipped")  # started again only with --redo
RESUME_MOVES = {"recovering": "resume", "not_ready": "block"}


@dataclass(frozen=True)
class Resumed:
    """What a resume commits (`Workspace.resume_checkpoint`)."""

    message: str
    state: Mapping[str, JSON]  # the state of the checkpoint it resumed from, recovering
    lead: Sequence[NewEvent]  # the recovery's events, logged before the prepare
    tree: str | None  # the working tree the resume proved or snapshotted (None: scan)
    extra: Callable[[Checkpoint], Extra]  # its report and `recovery.ready`
    assertions: Sequence[JSON] = ()  # the start's, re-pinned where a person accepted drift


class StepNotStartable(MoveRefused):
    """`step start` of a done or skipped step, without `--redo`."""

    def __init__(self, task: str, step: str, status: str) -> None:
        super().__init__(
            f"step {step!r} is {status}: it starts again only as a redo",
            hint=f"run `git ckpt step start {task} {step} --redo` to redo it (logged)",
        )
        self.step = step
        self.status = status


def checked_moves(events: Sequence[NewEvent]) -> Callable[[TaskView], list[NewEvent]]:
    """A `log_move` decision that logs `events` if the state machine takes every move they
    make from the state at the tip they are appended to (replayed as any reader would)."""

    def decide(view: TaskView) -> list[NewEvent]:
        state = json.loads(json.dumps(view.state)) if view.state is not None else None
        for ev in events:
            if ev.type in STATE_EVENTS:
                state = apply_event(state, ev)
        return list(events)

    return decide


def check_not_paused(t: TaskName, state: Mapping[str, JSON], force: bool) -> None:
    """A task waiting for its recovery to be confirmed moves no step and takes no
    checkpoint of its own: a recovering one unless `force`, a not-ready one never."""
    status = state.get("status")
    if status == "not_ready":
        raise not_ready(t.name, state)
    if status == "recovering" and not force:
        raise RecoveringError(
            f"task {t} is recovering: confirm the restatement first",
            hint=f"run `git ckpt confirm {t} --restatement FILE`, or pass --force",
        )


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
    steps, events, restore). Every move of a task or a step is checked against the state
    machine (`lifecycle.py`) under the task's lock, on the state at the log tip the write
    expects, and written in the same transaction: nothing is written for a refused move."""

    def task_start(
        self,
        task: str,
        goal: str,
        steps: Sequence[tuple[str, str]] = (),
        constraints: Sequence[str] = (),
        run: RunInfo | None = None,
    ) -> Checkpoint:
        """The task's first checkpoint, with its `task.start` logged in the same
        transaction: a start whose snapshot fails leaves nothing behind."""
        t = TaskName(task)
        t.check_no_prefix_clash(self.tasks())
        started = new_state(t.name, goal, list(steps), list(constraints))
        started["worktree"] = self.worktree

        def decide(view: TaskView) -> tuple[dict[str, JSON], list[NewEvent]]:
            if view.state is not None or view.tip is not None:
                raise UsageError(
                    f"task {task!r} already exists", hint=f"see `git ckpt task show {task}`"
                )
            t.check_no_prefix_clash(self.tasks())
            task_move(t.name, NEW, "start")
            return started, [NewEvent("task.start", data={"state": started})]

        draft = self._draft(t, "task start", "task_start", decide, run=run)
        return self._checkpoint(t, draft)

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
    ) -> Checkpoint:
        """Take a checkpoint of a task that exists (a name nobody started is `NotFound`:
        a typo is never a new task); `state` is a patch merged into the current state,
        its moves checked against the state machine. A recovering task takes none
        unless `force`; a not-ready one none at all.

        `assertions` are checked on resume (`{"id": …, "check": {…}}` objects; the facade
        also takes `--assert` specs); the key inputs (`[env] key_inputs`) are pinned too.
        """
        t = self.require_task(task)

        def decide(view: TaskView) -> tuple[dict[str, JSON], list[NewEvent]]:
            current = self._own_state(t, view)
            check_not_paused(t, current, force)
            new = current
            if state:
                check_external_patch(new, state)
                new = merge_update(new, state)
            if step is not None and find_step(new, step) is None:
                raise NotFound(f"task {t} has no step {step!r}")
            return new, []

        draft = self._draft(t, message, trigger, decide, light=light, step=step, run=run)
        draft = replace(draft, actor={"agent": actor} if actor else None)
        draft = replace(draft, assertions=self._assertions(assertions))
        return self._checkpoint(t, draft)

    def _own_state(self, t: TaskName, view: TaskView) -> dict[str, JSON]:
        """The state a write starts from: the task must exist and be this worktree's."""
        if view.state is None:
            raise NotFound(f"no task {t.name!r}", hint="start it with `git ckpt task start`")
        self._check_own(t, view.state)
        state: dict[str, JSON] = json.loads(json.dumps(view.state))
        return state

    def _assertions(self, given: Sequence[Any]) -> list[JSON]:
        """A checkpoint's assertions: the caller's and the pinned key inputs."""
        return [
            *self._checks_for_create(given),
            *key_input_assertions(self.repo.workdir, self.settings.key_inputs),
        ]

    def _draft(
        self,
        t: TaskName,
        message: str,
        trigger: str,
        decide: Decide,
        *,
        light: bool = False,
        step: str | None = None,
        run: RunInfo | None = None,
    ) -> Draft:
        """A checkpoint whose state `decide` computes (and checks) from the state at the
        log tip its transaction will expect: under the task's lock, again on each retry."""

        def plan() -> Plan:
            view = read_task(self.store, self.log, t)
            new, lead = decide(view)
            new = normalize_state(json.loads(json.dumps(new)))
            self._record_env(new, light, run)
            return Plan(new, lead, view.head, view.tip.commit if view.tip else None)

        return Draft(
            message,
            light,
            trigger,
            step,
            plan,
            assertions=self._assertions(()),
            secret_paths=self.settings.secret_paths,
        )

    def _checkpoint(self, t: TaskName, draft: Draft) -> Checkpoint:
        """Commit `draft` (`CheckpointStore.create`), then pack its objects."""
        started = time.perf_counter()
        made = self.store.create(t, draft)
        if not draft.light and draft.tree is None:
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

    # -- moves logged as events ---------------------------------------------------------

    def log_move(
        self,
        task: TaskName,
        decide: Callable[[TaskView], list[NewEvent]],
        refs: Mapping[str, Callable[[str | None], str]] | None = None,
    ) -> Event:
        """State-changing events, committed as a checkpoint is: under the task's lock,
        `decide` checks the move on the state at the log tip the append expects, and an
        append that finds the log moved (an event logged in between) decides again. `refs`
        (a resume's report) move in the same transaction, each computed from its tip. The
        first event logged is returned; a refused move writes nothing."""
        ref = task.events_ref

        def attempt() -> list[Event] | None:
            view = read_task(self.store, self.log, task)
            commit, events = self.log.batch(task, decide(view)).commit_on(view.head)
            moves = computed_moves(self.repo, refs)
            moves.append(RefMove(ref, commit, view.head))
            if not self.repo.cas_refs(moves, f"git ckpt: {events[0].type}"):
                return None
            return events

        with self.store.locked(task):
            events = retry_cas(attempt, f"appending to the event log of {task}")
        self.log.appended(task)
        return events[0]

    def safety_checkpoint(self, task: TaskName, message: str, tree: str) -> Checkpoint:
        """A full `pre_restore` checkpoint of `tree`, the working tree as just snapshotted
        (no second scan): what a restore or a resume is about to overwrite. Taken whatever
        the task's status: it records, it moves nothing."""

        def decide(view: TaskView) -> tuple[dict[str, JSON], list[NewEvent]]:
            return self._own_state(task, view), []

        draft = replace(self._draft(task, message, SAFETY_TRIGGER, decide), tree=tree)
        return self._checkpoint(task, draft)

    def resume_checkpoint(self, task: TaskName, resumed: Resumed) -> Checkpoint:
        """The checkpoint a resume writes: it stands for the checkpoint it resumed from
        (`resumed.state`: that one's, recovering or not ready), with the recovery's events
        logged before its prepare and its report moved in the same transaction."""

        def decide(view: TaskView) -> tuple[dict[str, JSON], list[NewEvent]]:
            current = self._own_state(task, view)
            target = str(resumed.state.get("status"))
            task_move(task.name, str(current.get("status")), RESUME_MOVES[target])
            return dict(resumed.state), list(resumed.lead)

        draft = self._draft(task, resumed.message, RESUME_TRIGGER, decide)
        pinned = {a.get("id") for a in draft.assertions if isinstance(a, dict)}  # now's win
        carried = [
            a for a in resumed.assertions if not (isinstance(a, dict) and a.get("id") in pinned)
        ]
        draft = replace(
            draft,
            tree=resumed.tree,
            extra=resumed.extra,
            assertions=[*carried, *draft.assertions],
        )
        return self._checkpoint(task, draft)

    # -- steps ------------------------------------------------------------------------

    def step_start(
        self,
        task: str,
        step_id: str,
        force: bool = False,
        risk: str | None = None,
        pre_expensive: Callable[[], bool] = lambda: True,
        redo: bool = False,
    ) -> Event:
        """`step.start`: a pending step starts, an in-progress one restarts, a failed one is
        retried, a done or skipped one only with `redo` (logged). A high-risk step first
        gets a full `pre_expensive_step` checkpoint (when `pre_expensive()` says the policy
        wants one). A start refused for a done step is logged (a drift signal), then
        `StepNotStartable` raised."""
        t = TaskName(task)
        state = self.require_own(t)
        check_not_paused(t, state, force)
        status = str(self._step(t, state, step_id)["status"])
        if status in REDONE and not redo:
            data = {"status": status}
            self.log.append(t, [NewEvent(REFUSED_START_EVENT, links={"step": step_id}, data=data)])
            raise StepNotStartable(t.name, step_id, status)
        step = self._step(t, state, step_id)
        risk = risk or (str(step["risk"]) if step.get("risk") else None)
        pre: str | None = None
        if risk == "high" and pre_expensive():
            pre = self.create(
                t.name,
                message=f"before high-risk step {step_id}",
                trigger="pre_expensive_step",
                step=step_id,
                force=force,
            ).commit

        def decide(view: TaskView) -> list[NewEvent]:
            current = self._own_state(t, view)
            check_not_paused(t, current, force)
            now = str(self._step(t, current, step_id)["status"])
            move = step_move(step_id, now, START_MOVES[now] if now not in REDONE else "redo")
            data: dict[str, JSON] = {"mode": move.name}
            if move.name == "redo":
                data["redo"] = True
            if risk:
                data["risk"] = risk
            if pre is not None:
                data["checkpoint"] = pre
            return [NewEvent("step.start", links={"step": step_id}, data=data)]

        return self.log_move(t, decide)

    def _step(self, t: TaskName, state: Mapping[str, JSON], step_id: str) -> dict[str, JSON]:
        step = find_step(state, step_id)
        if step is None:
            raise NotFound(f"task {t} has no step {step_id!r}")
        return step

    def step_done(
        self, task: str, step_id: str, outputs: JSON = None, run: RunInfo | None = None
    ) -> Checkpoint:
        """The full checkpoint that makes an in-progress step done, with its `step.end` in
        the same transaction (design section 1)."""
        t = TaskName(task)

        def decide(view: TaskView) -> tuple[dict[str, JSON], list[NewEvent]]:
            current = self._own_state(t, view)
            check_not_paused(t, current, force=False)
            done = self._step(t, current, step_id)
            step_move(step_id, str(done["status"]), "done")
            done["status"] = "done"
            done["outputs"] = outputs
            if current.get("current_step") == step_id:
                current["current_step"] = None
            steps = [s for s in current.get("steps") or [] if isinstance(s, dict)]
            if all(s.get("status") in ("done", "skipped") for s in steps):
                task_move(t.name, str(current.get("status")), "finish")
                current["status"] = "done"
            end = NewEvent(
                "step.end", links={"step": step_id}, data={"status": "done", "outputs": outputs}
            )
            return current, [end]

        draft = self._draft(t, f"step {step_id} done", "step_end", decide, step=step_id, run=run)
        return self._checkpoint(t, draft)

    def step_fail(self, task: str, step_id: str, outputs: JSON = None) -> Event:
        """`step.end {status: failed}` of an in-progress step (it may be retried)."""
        t = TaskName(task)

        def decide(view: TaskView) -> list[NewEvent]:
            current = self._own_state(t, view)
            check_not_paused(t, current, force=False)
            step_move(step_id, str(self._step(t, current, step_id)["status"]), "fail")
            data = {"status": "failed", "outputs": outputs}
            return [NewEvent("step.end", links={"step": step_id}, data=data)]

        return self.log_move(t, decide)

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
