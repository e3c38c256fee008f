"""The facade: `git_agentckpt.open(path)` returns a Checkpointer.

The CLI, the MCP server and Python users all call this; it returns data
(dataclasses and JSON-ready dicts) and never prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import BadStateError, CkptError, NotFound, RecoveringError, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.restore import apply_restore, plan_restore
from git_agentckpt.git.worktree import snapshot_tree
from git_agentckpt.model import (
    JSON,
    Event,
    NewEvent,
    RunInfo,
    find_step,
    merge_update,
    new_state,
    normalize_state,
)
from git_agentckpt.settings import CONTRACTS_DIR, Settings, init_files, load_settings
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.costs import record_cost
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import current_state
from git_agentckpt.store.tools import file_hashes, tool_versions

if TYPE_CHECKING:
    from git_agentckpt.store.share import ShareResult

__all__ = ["Checkpointer", "RestoreResult", "RunInfo"]

EventLike = NewEvent | Mapping[str, Any]


@dataclass(frozen=True)
class RestoreResult:
    target: Checkpoint
    written: tuple[str, ...]
    deleted: tuple[str, ...]
    skipped: tuple[str, ...]
    safety: Checkpoint | None
    dry_run: bool

    def to_json(self) -> dict[str, JSON]:
        return {
            "target": self.target.to_json(),
            "written": list(self.written),
            "deleted": list(self.deleted),
            "skipped": list(self.skipped),
            "safety_checkpoint": self.safety.to_json() if self.safety else None,
            "dry_run": self.dry_run,
        }


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


class Checkpointer:
    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.log = EventLog(repo)
        self.store = CheckpointStore(repo, self.log)
        self._settings: Settings | None = None

    @classmethod
    def open(cls, path: str = ".") -> Checkpointer:
        return cls(GitRepo.discover(path))

    # -- sharing (design section 6) --------------------------------------------------

    def fetch(self, remote: str = "origin") -> ShareResult:
        """Fetch another clone's audit trail from `remote` and merge it into ours."""
        from git_agentckpt.store import share

        return share.fetch(self.repo, self.log, remote)

    def push(self, remote: str = "origin") -> ShareResult:
        """Fetch and merge, then push every agent ref to `remote` in one atomic push."""
        from git_agentckpt.store import share

        return share.push(self.repo, self.log, remote)

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
            state, _ = current_state(self.store, self.log, t)
            if state is not None and state.get("status") in ("active", "recovering"):
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

    def state(self, task: str | TaskName) -> dict[str, JSON]:
        t = task if isinstance(task, TaskName) else TaskName(task)
        state, _ = current_state(self.store, self.log, t)
        if state is None:
            raise NotFound(f"no task {t.name!r}", hint="start it with `git ckpt task start`")
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
        if self.log.exists(t) or self.store.tip(t) is not None:
            raise UsageError(
                f"task {task!r} already exists", hint=f"see `git ckpt task show {task}`"
            )
        state = new_state(t.name, goal, list(steps), list(constraints))
        self.log.append(t, [NewEvent("task.start", data={"state": state})])
        made = self.create(task=t.name, message="task start", trigger="task_start", run=run)
        if os.path.isdir(os.path.join(self.repo.workdir, CONTRACTS_DIR)):
            from git_agentckpt.contracts.engine import record_watched

            with contextlib.suppress(CkptError):  # a bad contract: `check` will say so
                record_watched(self, t)  # files no snapshot holds, under the path globs
        return made

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
        assertions: Sequence[str | Mapping[str, Any]] = (),
        _state_override: dict[str, JSON] | None = None,
    ) -> Checkpoint:
        """Take a checkpoint; `state` is a patch merged into the current task state.

        `assertions` are `--assert` specs (`file_exists:PATH`, …) or mappings
        `{"id": …, "check": {…}}`; they are checked on resume.
        """
        t = self.resolve_task(task)
        # step done and resume hand over the state they just read: no second replay
        current = _state_override
        if current is None:
            current, _ = current_state(self.store, self.log, t)
        if current is None:  # an agent checkpointing a task nobody started: start it
            t.check_no_prefix_clash(self.tasks())
            current = new_state(t.name, "", [], [])
            self.log.append(t, [NewEvent("task.start", data={"state": current})])
        if current.get("status") == "recovering" and not force:
            raise RecoveringError(
                f"task {t} is recovering: confirm the restatement first",
                hint=f"run `git ckpt confirm {t} --restatement FILE`, or pass --force",
            )
        new = current
        if state:
            new = merge_update(new, state)
        if step is not None and find_step(new, step) is None:
            raise NotFound(f"task {t} has no step {step!r}")
        new = normalize_state(json.loads(json.dumps(new)))
        self._record_env(new, light, run)
        checks = self._assertions(assertions)
        started = time.perf_counter()
        made = self.store.create(
            t,
            message=message,
            light=light,
            trigger=trigger,
            step=step,
            state=new,
            secret_paths=self.settings.secret_paths,
            actor={"agent": actor} if actor else None,
            assertions=checks,
        )
        if not light:
            record_cost(self.repo, time.perf_counter() - started)
        return made

    def _assertions(self, given: Sequence[str | Mapping[str, Any]]) -> list[JSON]:
        out: list[JSON] = []
        if not given and not self.settings.key_inputs:
            return out  # the common case: no YAML parser, no contracts module to import
        from git_agentckpt.contracts.schema import assertion_from_spec, parse_assertions

        mappings = [dict(a) for a in given if not isinstance(a, str)]
        for a in given:
            if isinstance(a, str):
                out.append(assertion_from_spec(a).to_json())
        if mappings:
            out.extend(a.to_json() for a in parse_assertions(mappings, source="assertions"))
        if self.settings.key_inputs:
            from git_agentckpt.contracts.engine import key_input_assertions

            out.extend(key_input_assertions(self.repo.workdir, self.settings.key_inputs))
        return out

    # -- steps ------------------------------------------------------------------------

    def step_start(
        self, task: str, step_id: str, force: bool = False, risk: str | None = None
    ) -> Event:
        """`step.start`; a high-risk step first gets a full `pre_expensive_step` checkpoint."""
        t = TaskName(task)
        state = self.state(t)
        if state.get("status") == "recovering" and not force:
            raise RecoveringError(
                f"task {t} is recovering: confirm the restatement first",
                hint=f"run `git ckpt confirm {t} --restatement FILE`, or pass --force",
            )
        step = find_step(state, step_id)
        if step is None:
            raise NotFound(f"task {t} has no step {step_id!r}")
        status = step["status"]
        kinds = {"pending": "start", "in_progress": "redo", "failed": "retry"}
        if status not in kinds:
            from git_agentckpt.contracts.drift import record_refused_start

            record_refused_start(self.log, t, step_id, str(status))
            raise UsageError(
                f"step {step_id!r} is {status}; only pending, in_progress or failed steps start",
            )
        risk = risk or (str(step["risk"]) if step.get("risk") else None)
        data: dict[str, JSON] = {"mode": kinds[str(status)]}
        if risk:
            data["risk"] = risk
        if risk == "high":
            from git_agentckpt.tick import load_policy

            if load_policy(self).pre_expensive_step:
                pre = self.create(
                    t.name,
                    message=f"before high-risk step {step_id}",
                    trigger="pre_expensive_step",
                    step=step_id,
                    force=force,
                )
                data["checkpoint"] = pre.commit
        return self.log.append(t, [NewEvent("step.start", links={"step": step_id}, data=data)])[0]

    def tick(self, task: str | None = None, **signals: Any) -> Any:
        """Decide none/light/full from `signals` (Signals fields), act, log the decision."""
        from git_agentckpt.tick import tick as run_tick
        from git_agentckpt.triggers import Signals

        signals.setdefault("now", time.time())
        return run_tick(self, task, Signals(**signals), set(signals) - {"now"})

    def step_done(
        self, task: str, step_id: str, outputs: JSON = None, run: RunInfo | None = None
    ) -> Checkpoint:
        """`step.end`, then the full checkpoint whose note marks the step done."""
        t = TaskName(task)
        state = self.state(t)
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
        step["status"] = "done"
        step["outputs"] = outputs
        if state.get("current_step") == step_id:
            state["current_step"] = None
        steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
        if all(s.get("status") in ("done", "skipped") for s in steps):
            state["status"] = "done"
        return self.create(
            task=t.name,
            message=f"step {step_id} done",
            trigger="step_end",
            step=step_id,
            run=run,
            force=True,
            _state_override=state,
        )

    def step_fail(self, task: str, step_id: str, outputs: JSON = None) -> Event:
        t = TaskName(task)
        state = self.state(t)
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
        """Append a batch of events in one commit (one compare-and-swap)."""
        return self.log.append(TaskName(task), [_as_new_event(e) for e in events])

    def event(
        self,
        task: str,
        type_: str,
        payload: Mapping[str, JSON] | None = None,
        actor: str | None = None,
    ) -> Event:
        return self.log.append(
            TaskName(task), [NewEvent.from_payload(type_, payload or {}, actor)]
        )[0]

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
        if task and self.store.tip(tasks[0]) is None and not self.log.exists(tasks[0]):
            raise NotFound(f"no task {task!r}", hint="see `git ckpt list` for the tasks")
        out: list[Checkpoint] = []
        for t in tasks:
            out.extend(self.store.chain(t))
        return out

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
            for c in self.repo.diff_trees(ca.tree, cb.tree)
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
        target = self.resolve(name)
        task = TaskName(target.task)
        current_tree = snapshot_tree(self.repo, self.settings.secret_paths)
        plan = plan_restore(self.repo, current_tree, target.tree)
        safety: Checkpoint | None = None
        changes = plan.writes or plan.deletes
        if changes and not dry_run:
            known = {c.tree for c in self.store.chain(task)}
            known |= {tip.tree for t in self.store.tasks() if (tip := self.store.tip(t))}
            if current_tree not in known:
                msg = f"safety before restoring {target.id}"
                self.create(task.name, message=msg, light=True, trigger="pre_restore", force=True)
                safety = self.create(task.name, message=msg, trigger="pre_restore", force=True)
            crash_point("restore.safety")
            apply_restore(self.repo, plan)
            self.log.append(
                task,
                [
                    NewEvent(
                        "workspace.restore",
                        links={"checkpoint": target.commit},
                        data={
                            "written": len(plan.writes),
                            "deleted": len(plan.deletes),
                            "safety": safety.commit if safety else None,
                        },
                    )
                ],
            )
            crash_point("restore.logged")
        return RestoreResult(
            target=target,
            written=tuple(c.path for c in plan.writes),
            deleted=tuple(c.path for c in plan.deletes),
            skipped=plan.skipped,
            safety=safety,
            dry_run=dry_run,
        )
