"""The task store: tasks, checkpoints, steps and events of one repository.

`Workspace` is what the use cases (recovery, contracts, the trigger policy)
work on, and what the facade (`api.Checkpointer`) adds their composition to:
it imports nothing above the store, so no use case depends on the facade.
It returns data (dataclasses and JSON-ready dicts) and never prints.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import BadStateError, CkptError, NotFound, RecoveringError, UsageError
from git_agentckpt.git.repo import GitRepo
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
from git_agentckpt.settings import Settings, init_files, load_settings
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.costs import record_cost
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.evidence import SuspectClaim, unsupported_claims
from git_agentckpt.store.pins import key_input_assertions
from git_agentckpt.store.redaction import check_name
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.restoring import RestoreResult, restore_checkpoint
from git_agentckpt.store.state import current_state, read_task
from git_agentckpt.store.tools import file_hashes, tool_versions

__all__ = ["EventLike", "RestoreResult", "StepNotStartable", "Workspace"]

EventLike = NewEvent | Mapping[str, Any]
START_MODES = {"pending": "start", "in_progress": "redo", "failed": "retry"}


MAIN_WORKTREE = "main"


def worktree_of(repo: GitRepo) -> dict[str, JSON]:
    """`{"id", "path"}` of the repository's worktree: `main`, or `worktrees/<name>` for a
    linked one (`git worktree add`); the id is what a task's state records."""
    if repo.git_dir == repo.common_dir:
        return {"id": MAIN_WORKTREE, "path": repo.workdir}
    return {"id": "worktrees/" + os.path.basename(repo.git_dir), "path": repo.workdir}


def owner_of(state: Mapping[str, JSON]) -> dict[str, JSON]:
    """The worktree a task belongs to (tasks older than this record: the main one)."""
    owner = state.get("worktree")
    if isinstance(owner, dict) and isinstance(owner.get("id"), str):
        return owner
    return {"id": MAIN_WORKTREE, "path": None}


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


class Workspace:
    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        # which worktree this is: a task belongs to the worktree that started it
        self.worktree: dict[str, JSON] = worktree_of(repo)
        self.log = EventLog(repo)
        self.store = CheckpointStore(repo, self.log)
        self._settings: Settings | None = None

    @classmethod
    def open(cls, path: str = ".") -> Workspace:
        return cls(GitRepo.discover(path))

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.repo.workdir)
            self.repo.max_file_size = self._settings.max_file_size
        return self._settings

    # -- tasks ------------------------------------------------------------------------

    def init(self) -> tuple[list[str], list[str]]:
        return init_files(self.repo.workdir)

    def tasks(self) -> list[TaskName]:
        names = {t.name for t in self.log.tasks()} | {t.name for t in self.store.tasks()}
        return [TaskName(n) for n in sorted(names)]

    def resolve_task(self, task: str | None) -> TaskName:
        """-t TASK, then $GIT_CKPT_TASK, then the single active task."""
        name = task or os.environ.get("GIT_CKPT_TASK")
        if name:
            return TaskName(name)
        active = []
        for t in self.tasks():
            try:
                state, _ = current_state(self.store, self.log, t)
            except CkptError as exc:  # one damaged task does not stop the others
                self.store.warn(f"task {t}: {exc.one_line()} (skipped)")
                continue
            if (
                state is not None
                and state.get("status") in ("active", "recovering")
                and owner_of(state)["id"] == self.worktree["id"]
            ):
                active.append(t.name)
        if len(active) == 1:
            return TaskName(active[0])
        if not active:
            raise UsageError(
                "no active task",
                hint="name one with -t TASK or start one with `git ckpt task start`",
            )
        raise UsageError(
            f"{len(active)} active tasks ({', '.join(active)}): which one?",
            hint="name it with -t TASK or set GIT_CKPT_TASK",
        )

    def require_task(self, task: str | None) -> TaskName:
        """`resolve_task`, and the task must exist (a log or a checkpoint): a name nobody
        started is `NotFound` with the closest known names, never a new task."""
        t = self.resolve_task(task)
        if self.log.exists(t) or self.store.tip(t) is not None:
            return t
        check_name(self.log.redactor, "task name", t.name)  # never echo a secret back
        known = [k.name for k in self.tasks()]
        close = difflib.get_close_matches(t.name, known, n=3, cutoff=0.6)
        if close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            hint = "see `git ckpt task list`" if known else "no task exists yet"
        raise NotFound(
            f"no task {t.name!r}",
            hint=f"{hint} (a new task starts with `git ckpt task start {t.name} --goal ...`)",
        )

    def state(self, task: str | TaskName) -> dict[str, JSON]:
        """The current state; events replay refused are skipped and named in `warnings`."""
        t = task if isinstance(task, TaskName) else TaskName(task)
        view = read_task(self.store, self.log, t)
        for skipped in view.skipped:
            self.store.warn(f"task {t}: {skipped.one_line()}")
        if view.state is None:
            raise NotFound(f"no task {t.name!r}", hint="start it with `git ckpt task start`")
        return view.state

    def suspect_claims(self, task: str | TaskName) -> list[SuspectClaim]:
        """Claims of the current state that the checkpoint history does not back."""
        t = task if isinstance(task, TaskName) else TaskName(task)
        view = read_task(self.store, self.log, t)
        if view.state is None:
            raise NotFound(f"no task {t.name!r}", hint="start it with `git ckpt task start`")
        return unsupported_claims(self.store, t, view.state, view.tip)

    def _check_own(self, task: TaskName, state: Mapping[str, JSON]) -> None:
        """Refuse to write to a task another worktree of this repository started: its
        checkpoints hold that worktree's files (design: a task belongs to its worktree)."""
        owner = owner_of(state)
        if owner["id"] == self.worktree["id"]:
            return
        where = owner.get("path") or owner["id"]
        raise UsageError(
            f"task {task} belongs to the worktree at {where} ({owner['id']}), not to this "
            f"one ({self.worktree['id']})",
            hint=f"run git ckpt in {where}, or start a task of this worktree with "
            "`git ckpt task start`",
        )

    def require_own(self, task: str | TaskName) -> dict[str, JSON]:
        """The task's current state, refused when another worktree owns the task."""
        t = task if isinstance(task, TaskName) else TaskName(task)
        state = self.state(t)
        self._check_own(t, state)
        return state

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
    ) -> Checkpoint:
        """Take a checkpoint; `state` is a patch merged into the current task state.

        `assertions` are checked on resume (`{"id": …, "check": {…}}` objects; the facade
        also takes `--assert` specs); the key inputs (`[env] key_inputs`) are pinned too.
        """
        t = self.resolve_task(task)
        checks = [
            *self._checks_for_create(assertions),
            *key_input_assertions(self.repo.workdir, self.settings.key_inputs),
        ]

        def compute_state() -> tuple[dict[str, JSON], list[NewEvent]]:
            """Runs under the task's lock (and again on each retry): see CheckpointStore.
            Also the events to log with the prepare: the task.start of a new task."""
            lead: list[NewEvent] = []
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
        )
        if not light:
            record_cost(self.repo, time.perf_counter() - started)
        return made

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
        return self.log.append(TaskName(task), batch)

    def event(
        self,
        task: str,
        type_: str,
        payload: Mapping[str, JSON] | None = None,
        actor: str | None = None,
    ) -> Event:
        return self.append_events(task, [NewEvent.from_payload(type_, payload or {}, actor)])[0]

    def events_marked(self, task: str, limit: int | None = None) -> list[tuple[Event, bool]]:
        """Events oldest first, each with whether it came in by a union merge from another
        clone (`git ckpt log` marks those: they keep the other clone's numbers)."""
        t = TaskName(task)
        if not self.log.exists(t):
            raise NotFound(f"no event log for task {task!r}", hint="see `git ckpt list`")
        out: list[tuple[Event, bool]] = []
        for item in self.log.iter_back_marked(t):
            if limit is not None and len(out) >= limit:
                break
            out.append(item)
        out.reverse()
        return out

    def events(self, task: str, limit: int | None = None) -> list[Event]:
        t = TaskName(task)
        if not self.log.exists(t):
            raise NotFound(f"no event log for task {task!r}", hint="see `git ckpt list`")
        if limit is None:
            return self.log.read(t)
        out: list[Event] = []
        for ev in self.log.iter_back(t):
            if len(out) >= limit:
                break
            out.append(ev)
        out.reverse()
        return out

    # -- reading checkpoints ----------------------------------------------------------

    def checkpoints(self, task: str | None = None) -> list[Checkpoint]:
        tasks = [TaskName(task)] if task else self.store.tasks()
        if (
            task
            and not self.repo.read_ref(tasks[0].checkpoints_ref)
            and not self.log.exists(tasks[0])
        ):
            raise NotFound(f"no task {task!r}", hint="see `git ckpt list` for the tasks")
        out: list[Checkpoint] = []
        for t in tasks:
            if task:  # the task asked for: its damage is the error
                out.extend(self.store.chain(t))
                continue
            try:
                out.extend(list(self.store.chain(t)))
            except CkptError as exc:  # listing every task: report it, list the others
                self.store.warn(f"task {t}: {exc.one_line()} (skipped)")
        return out

    @property
    def warnings(self) -> list[str]:
        """Damaged records the reads so far skipped, one line each (named, with their task)."""
        return self.store.warnings

    def task_summaries(self) -> list[dict[str, JSON]]:
        """One row per task (status, goal, current step, steps done); damaged tasks skipped."""
        rows: list[dict[str, JSON]] = []
        for t in self.tasks():
            try:
                state = self.state(t)
            except CkptError as exc:
                self.store.warn(f"task {t}: {exc.one_line()} (skipped)")
                continue
            rows.append(
                {
                    "task": t.name,
                    "status": state.get("status"),
                    "goal": state.get("goal"),
                    "current_step": state.get("current_step"),
                    "done": len(state.get("done") or []),
                    "steps": len(state.get("steps") or []),
                }
            )
        return rows

    def resolve(self, name: str) -> Checkpoint:
        return self.store.resolve(name)

    def show(self, name: str) -> dict[str, JSON]:
        ckpt = self.resolve(name)
        return {
            "checkpoint": ckpt.to_json(),
            "state": self.store.state_note(ckpt.commit),
            "assertions": self.store.assertions_note(ckpt.commit),
        }

    def diff(self, a: str, b: str) -> dict[str, JSON]:
        from git_agentckpt.store.diff import state_changes

        ca, cb = self.resolve(a), self.resolve(b)
        files = [
            {"status": c.status, "path": c.path, "old": c.old_id, "new": c.new_id}
            for c in self.repo.diff_trees(ca.tree, cb.tree, type_changes=True)
        ]
        sa = self.store.state_note(ca.commit) or {}
        sb = self.store.state_note(cb.commit) or {}
        return {
            "from": ca.to_json(),
            "to": cb.to_json(),
            "files": files,
            "state": state_changes(sa, sb),
        }

    # -- restore ----------------------------------------------------------------------

    def restore(self, name: str, dry_run: bool = False) -> RestoreResult:
        """Bring the working tree to checkpoint `name` (a safety checkpoint first)."""
        return restore_checkpoint(self, name, dry_run)
