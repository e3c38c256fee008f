"""Reading the task store: tasks, their state, checkpoints and events.

`TaskReader` is the half of `Workspace` (store/workspace.py) that every command
reads through: which tasks exist and which is meant, the current state (with
the events replay refused named in `warnings`), claims the history does not
back, whose worktree a task is, checkpoints, events, diffs. Damaged records of
one task are skipped and named (design: one bad record affects only its task).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Self

from git_agentckpt.errors import CkptError, NotFound, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import (
    JSON,
    Event,
)
from git_agentckpt.settings import Settings, init_files, load_settings
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.evidence import SuspectClaim, unsupported_claims
from git_agentckpt.store.redaction import check_name
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import current_state, read_task

if TYPE_CHECKING:
    from git_agentckpt.store.log_filter import LogFilter
    from git_agentckpt.store.log_stream import LogEntry

__all__ = ["MAIN_WORKTREE", "TaskReader", "owner_of", "worktree_of"]
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


class TaskReader:
    """What every command reads: tasks, state, checkpoints, events (no writes but the
    roll-forward of locate and the warnings of damaged records)."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        # which worktree this is: a task belongs to the worktree that started it
        self.worktree: dict[str, JSON] = worktree_of(repo)
        self.log = EventLog(repo)
        self.store = CheckpointStore(repo, self.log)
        self._settings: Settings | None = None

    @classmethod
    def open(cls, path: str = ".") -> Self:
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

    def log_entries(
        self,
        task: str,
        limit: int | None = None,
        full: bool = False,
        filt: LogFilter | None = None,
    ) -> Iterator[LogEntry]:
        """The event log as a stream, oldest first (`store/log_stream.py`): constant
        memory, and with `limit` only the last `limit` events' commits are read; `full`
        loads the payloads stored apart (store/payloads.py); `filt` selects events
        (`log_filter`). Damaged lines are skipped and named in `warnings`."""
        from git_agentckpt.store.log_stream import stream

        t = TaskName(task)
        if not self.log.exists(t):
            raise NotFound(f"no event log for task {task!r}", hint="see `git ckpt list`")
        return stream(self.log, t, limit, self.store.warn, full, filt)

    def log_rendered(
        self,
        task: str,
        render: Callable[[LogEntry], str],
        full: bool = False,
        filt: LogFilter | None = None,
        merged: Callable[[], None] | None = None,
    ) -> Iterator[str]:
        """The whole event log, each entry through `render`, oldest first, in chunks of
        lines (`log_stream.rendered`): what `log_entries` gives, read the fast way round
        (git streams the log newest first while it is checked), in constant memory;
        `merged` is called when an entry shown came in by a union merge."""
        from git_agentckpt.store.log_stream import rendered

        t = TaskName(task)
        if not self.log.exists(t):
            raise NotFound(f"no event log for task {task!r}", hint="see `git ckpt list`")
        return rendered(self.log, t, render, self.store.warn, full, filt, merged)

    def log_filter(
        self,
        task: str,
        types: Sequence[str] = (),
        step: str | None = None,
        since: str | None = None,
        actor: str | None = None,
    ) -> LogFilter:
        """The filter of `git ckpt log`'s options; `since` is an age, a date or a
        checkpoint id of `task` (store/log_filter.py)."""
        from git_agentckpt.store.log_filter import LogFilter, bad_since, parse_since

        since_ts = since_commit = None
        if since is not None:
            since_ts = parse_since(since)
            if since_ts is None:
                try:
                    found = self.resolve(since)
                except CkptError:
                    raise bad_since(since) from None
                if found.task != TaskName(task).name:
                    raise bad_since(since)
                since_commit = found.commit
        return LogFilter(tuple(types), step, actor, since_ts, since_commit)

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
