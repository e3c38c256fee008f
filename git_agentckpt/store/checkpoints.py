"""Checkpoint commits under `refs/agent/checkpoints/<task>`, created in write-ahead order.

1. write the snapshot tree and the commit object (nothing points at them yet);
2. write the notes of that commit (state, assertions);
3. append `checkpoint.prepare` naming the commit;
4. compare-and-swap the checkpoint ref from its old value: the commit point;
5. append `checkpoint.commit`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import CkptError, ConflictError, CorruptError, NotFound
from git_agentckpt.git.large import assertion as large_assertion
from git_agentckpt.git.notes import note_id, read_note, write_notes
from git_agentckpt.git.repo import CommitInfo, GitRepo
from git_agentckpt.model import (
    JSON,
    NewEvent,
    check_version,
    dumps,
    is_ulid,
    new_ulid,
)
from git_agentckpt.progress import Progress
from git_agentckpt.retry import retry
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.guard import ZERO, Update, check_updates
from git_agentckpt.store.redaction import check_name, redact_assertions, redact_state
from git_agentckpt.store.refs import ASSERTION_NOTES, CHECKPOINTS, STATE_NOTES, TaskName
from git_agentckpt.trailers import checkpoint_message, parse_trailers


@dataclass(frozen=True)
class Checkpoint:
    id: str  # Checkpoint-Id (a ULID)
    commit: str
    task: str
    number: int
    kind: str  # full | light
    trigger: str
    step: str | None
    baseline: str | None
    head: str | None
    subject: str
    time: int
    tree: str
    parent: str | None  # the previous checkpoint of the task, if any

    def to_json(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "commit": self.commit,
            "task": self.task,
            "number": self.number,
            "kind": self.kind,
            "trigger": self.trigger,
            "step": self.step,
            "baseline": self.baseline,
            "head": self.head,
            "subject": self.subject,
            "time": self.time,
            "tree": self.tree,
            "parent": self.parent,
        }


def _none(value: str | None) -> str | None:
    return None if value in (None, "", "none") else value


def parse_checkpoint(info: CommitInfo) -> Checkpoint | None:
    """The checkpoint a commit records, or None if it is not a checkpoint commit."""
    tr = parse_trailers(info.message)
    if "Checkpoint-Id" not in tr or "Task" not in tr:
        return None
    prev = info.parents[0] if info.parents else None
    baseline = _none(tr.get("Baseline"))
    seq = tr.get("Seq", "0") or "0"
    if not seq.isdigit() or len(seq) > 18:
        raise CorruptError(
            f"checkpoint {info.id[:12]} of task {tr['Task']!r} has a malformed Seq trailer "
            f"{seq[:40]!r}",
            hint="the record is damaged or forged",
        )
    return Checkpoint(
        id=tr["Checkpoint-Id"],
        commit=info.id,
        task=tr["Task"],
        number=int(seq),
        kind=tr.get("Kind", "full"),
        trigger=tr.get("Trigger", "manual"),
        step=_none(tr.get("Step")),
        baseline=baseline,
        head=_none(tr.get("Head")),
        subject=info.message.split("\n", 1)[0],
        time=info.time,
        tree=info.tree,
        parent=prev if prev is not None and prev != baseline else None,
    )


def blob_id(data: bytes, like: str) -> str:
    """The id git gives `data` stored as a blob, hashed as `like` (an object id) is."""
    algo = hashlib.sha256 if len(like) == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _load_note(data: bytes, what: str) -> JSON:
    """A note's JSON; damaged bytes (not UTF-8, not JSON, nested past any sense) are corrupt."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptError(f"{what} is not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise CorruptError(f"{what} is not JSON: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise CorruptError(f"{what} nests JSON too deeply to read") from exc


def _trailers(
    ckpt_id: str,
    task: TaskName,
    kind: str,
    trigger: str,
    step: str | None,
    number: int,
    baseline: str | None,
    head: str | None,
) -> dict[str, str]:
    """The trailers of a checkpoint commit (design section 1), in their order."""
    return {
        "Checkpoint-Id": ckpt_id,
        "Task": task.name,
        "Kind": kind,
        "Trigger": trigger,
        "Step": step or "none",
        "Seq": str(number),
        "Baseline": baseline or "none",
        "Head": head or "none",
    }


def snapshot_with_progress(repo: GitRepo, secret_paths: Sequence[str]) -> str:
    """A full snapshot, counting on stderr the files `git add` takes when it runs long."""
    from git_agentckpt.git.worktree import snapshot_tree  # not imported by read commands

    with Progress("Snapshotting files") as meter:
        return snapshot_tree(repo, secret_paths, meter.advance if meter.active else None)


def _bad_tip(task: TaskName, commit: str) -> CorruptError:
    return CorruptError(
        f"{task.checkpoints_ref} points at {commit[:12]}, which is not a checkpoint commit here",
        hint="the ref is damaged: fetch the task again from a clone that has it",
    )


# triggers the recovery rules read (design sections 1 and 3)
STEP_END_TRIGGER = "step_end"  # the checkpoint that makes a step done
RESUME_TRIGGER = "resume"  # stands for the checkpoint a resume started from
SAFETY_TRIGGER = "pre_restore"  # holds the drift a restore undid: never a starting point

LOCK_WAIT_SECONDS = 10.0  # longer than STALE_LOCK_SECONDS, so a killed writer's lock is broken
_TILDE = re.compile(r"^(?P<task>.+?)~(?P<n>\d+)$")
_HEX = re.compile(r"^[0-9a-fA-F]{4,64}$")


class CheckpointStore:
    def __init__(self, repo: GitRepo, log: EventLog) -> None:
        self.repo = repo
        self.log = log
        # damaged records that reads skipped, one line each (the CLI prints them as warnings)
        self.warnings: list[str] = []

    def warn(self, line: str) -> None:
        if line not in self.warnings:
            self.warnings.append(line)

    # -- reading ----------------------------------------------------------------------

    def tasks(self) -> list[TaskName]:
        return [TaskName.from_ref(r) for r in sorted(self.repo.list_refs(CHECKPOINTS))]

    def tip(self, task: TaskName) -> Checkpoint | None:
        commit = self.repo.read_ref(task.checkpoints_ref)
        if not commit:
            return None
        try:
            return self.get(commit)
        except NotFound as exc:  # a dangling ref, or one at a tree or blob
            raise _bad_tip(task, commit) from exc

    def get(self, commit: str) -> Checkpoint:
        ckpt = parse_checkpoint(self.repo.read_commit(commit))
        if ckpt is None:
            raise NotFound(f"{commit[:12]} is not a checkpoint commit")
        return ckpt

    def chain(self, task: TaskName, start: str | None = None) -> Iterator[Checkpoint]:
        """Checkpoints of `task`, newest first, from the tip (or `start`)."""
        current = start or self.repo.read_ref(task.checkpoints_ref)
        if current and start is None:
            try:
                self.repo.read_commit(current)
            except NotFound as exc:  # a dangling tip, or one at a tree or blob
                raise _bad_tip(task, current) from exc
        while current:
            info = self.repo.read_commit(current)
            try:
                ckpt = parse_checkpoint(info)
            except CorruptError as exc:  # one damaged checkpoint: report it, walk past it
                self.warn(f"task {task}: {exc.one_line()} (skipped)")
                current = info.parents[0] if info.parents else None
                continue
            if ckpt is None or ckpt.task != task.name:
                return
            yield ckpt
            current = ckpt.parent

    def state_note(self, commit: str) -> dict[str, JSON] | None:
        blob = self.state_note_id(commit)
        return None if blob is None else self.state_note_at(blob, commit)

    def state_note_id(self, commit: str) -> str | None:
        """The blob id of `commit`'s state note (None: it has none), the note unread."""
        return note_id(self.repo, STATE_NOTES, commit)

    def state_note_at(self, blob: str, commit: str) -> dict[str, JSON]:
        """The state note stored in `blob` (the note of `commit`), checked."""
        obj = _load_note(self.repo.read_blob(blob), f"the state note of {commit[:12]}")
        if not isinstance(obj, dict):
            raise CorruptError(f"the state note of {commit[:12]} is not a JSON object")
        check_version(obj, f"the state note of {commit[:12]}")
        return obj

    def assertions_note(self, commit: str) -> list[JSON]:
        data = read_note(self.repo, ASSERTION_NOTES, commit)
        if data is None:
            return []
        obj = _load_note(data, f"the assertions note of {commit[:12]}")
        if not isinstance(obj, dict):
            raise CorruptError(f"the assertions note of {commit[:12]} is not a JSON object")
        check_version(obj, f"the assertions note of {commit[:12]}")
        items = obj.get("assertions", [])
        return items if isinstance(items, list) else []

    def resolve(self, name: str) -> Checkpoint:
        """TASK (its tip), TASK~N, a Checkpoint-Id, or a commit sha / sha prefix."""
        name = name.strip()
        tasks = {t.name: t for t in self.tasks()}
        if name in tasks:
            tip = self.tip(tasks[name])
            if tip is not None:
                return tip
        m = _TILDE.match(name)
        if m and m["task"] in tasks:
            chain = list(self.chain(tasks[m["task"]]))
            n = int(m["n"])
            if n >= len(chain):
                raise NotFound(
                    f"{name}: task {m['task']!r} has only {len(chain)} checkpoints",
                    hint=f"use {m['task']}~0 .. {m['task']}~{len(chain) - 1}",
                )
            return chain[n]
        if is_ulid(name.upper()):
            for task in tasks.values():
                try:
                    for ckpt in self.chain(task):
                        if ckpt.id == name.upper():
                            return ckpt
                except CkptError as exc:  # another task's damage does not hide this one
                    self.warn(f"task {task}: {exc.one_line()} (skipped)")
        if _HEX.match(name):
            commit = self.repo.resolve_prefix(name)
            if commit is not None:
                found = parse_checkpoint(self.repo.read_commit(commit))
                if found is not None:
                    return found
        raise NotFound(
            f"unknown checkpoint {name!r}",
            hint="name one as TASK, TASK~N, a Checkpoint-Id or a commit sha; see `git ckpt list`",
        )

    # -- writing ----------------------------------------------------------------------

    def create(
        self,
        task: TaskName,
        *,
        message: str,
        light: bool,
        trigger: str,
        step: str | None,
        state: Callable[[], tuple[Mapping[str, JSON], Sequence[NewEvent]]],
        assertions: Sequence[JSON] = (),
        secret_paths: Sequence[str] = (),
        actor: Mapping[str, JSON] | None = None,
        tree: str | None = None,
        committed: Callable[[Checkpoint], Sequence[NewEvent]] | None = None,
    ) -> Checkpoint:
        """Create one checkpoint in write-ahead order (see the module docstring).

        `committed(checkpoint)`, when given, runs once the commit point is passed, before
        the `checkpoint.commit` event is logged; the events it returns are logged with
        that event, in one commit (a resume stores its report there and logs its
        `recovery.ready`). A crash while it runs leaves the checkpoint committed
        without its commit event, which the next resume logs (`commit-event-missing`).

        `tree` (a full checkpoint only) is the working tree as the caller already knows it,
        proven equal to the disk (a verification that found it clean, the snapshot a
        restore just took): it is used instead of a second snapshot.

        `state()` computes the note to write, and the events to log with the
        `checkpoint.prepare` in one commit (a `task.start` when this checkpoint starts
        the task: nothing is logged if the snapshot fails first). It is called under
        the task's lock and again on every retry, so a note never carries a state read
        before a concurrent writer (a `step done`, another checkpoint) committed its own.
        """
        lock_dir = os.path.join(self.repo.common_dir, "agent", "locks")
        os.makedirs(lock_dir, exist_ok=True)
        from git_agentckpt.git.worktree import locked  # writes only: not at start-up

        # its objects go to disk as one pack, each part before a ref names it
        lock = os.path.join(lock_dir, task.name.replace("/", "%") + ".flock")
        with locked(lock), self.repo.batched_objects():
            return retry(
                lambda: self._create_once(
                    task,
                    message,
                    light,
                    trigger,
                    step,
                    state,
                    assertions,
                    secret_paths,
                    actor,
                    tree,
                    committed,
                ),
                what=f"checkpoint of {task}",
                tries=20,
                exhausted=lambda: ConflictError(
                    f"checkpoint ref of {task} kept moving under another writer",
                    hint="nothing was committed; run the command again",
                ),
            )

    def _move_ref(self, task: TaskName, commit: str, old: str | None, message: str) -> bool:
        """The compare-and-swap of the commit point. False: another writer moved the ref.

        A ref that is only *locked* (by a writer now, or by one that was killed) is
        waited for; `cas_ref` breaks a lock old enough to be stale.
        """
        ref = task.checkpoints_ref

        def attempt() -> bool | None:
            if self.repo.cas_ref(ref, commit, old, message):
                return True
            return False if self.repo.read_ref(ref) != old else None  # None: only locked

        return retry(
            attempt,
            what=f"moving {ref}",
            tries=None,
            deadline_seconds=LOCK_WAIT_SECONDS,
            first_delay=0.001,
            max_delay=0.1,
            exhausted=lambda: ConflictError(
                f"{ref} stayed locked for {LOCK_WAIT_SECONDS:.0f} s",
                hint=f"if no git process is running, run `git ckpt doctor` (or remove "
                f".git/{ref}.lock)",
            ),
        )

    def _tree(
        self,
        light: bool,
        prev: Checkpoint | None,
        baseline: str | None,
        secret_paths: Sequence[str],
        assertions: Sequence[JSON],
        known: str | None = None,
    ) -> tuple[str, Sequence[JSON]]:
        """The checkpoint's tree: its parent's for a light one (no disk scan), else a
        snapshot (or `known`, the caller's proven one); large files the snapshot leaves
        out are pinned as assertions instead."""
        repo = self.repo
        if not light:
            from git_agentckpt.git.worktree import large_files

            tree = known if known is not None else snapshot_with_progress(repo, secret_paths)
            return tree, [*assertions, *(large_assertion(f) for f in large_files(repo))]
        if prev is not None:
            return prev.tree, assertions
        return (repo.read_commit(baseline).tree if baseline else repo.empty_tree()), assertions

    def _commit_point(self, task: TaskName, commit: str, old: str | None, reason: str) -> bool:
        """The guard every checkpoint move passes, then the compare-and-swap."""
        problems = check_updates(self.repo, [Update(old or ZERO, commit, task.checkpoints_ref)])
        if problems:
            raise CorruptError("refusing to move the checkpoint ref: " + "; ".join(problems))
        return self._move_ref(task, commit, old, reason)

    def _create_once(
        self,
        task: TaskName,
        message: str,
        light: bool,
        trigger: str,
        step: str | None,
        state: Callable[[], tuple[Mapping[str, JSON], Sequence[NewEvent]]],
        assertions: Sequence[JSON],
        secret_paths: Sequence[str],
        actor: Mapping[str, JSON] | None,
        known_tree: str | None = None,
        committed: Callable[[Checkpoint], Sequence[NewEvent]] | None = None,
    ) -> Checkpoint | None:
        repo = self.repo
        old = repo.read_ref(task.checkpoints_ref)
        prev = self.get(old) if old else None
        head = repo.head()
        baseline = prev.baseline if prev else head
        # 1. snapshot tree and commit object: invisible until the ref moves
        tree, assertions = self._tree(light, prev, baseline, secret_paths, assertions, known_tree)
        parents = [old] if old else ([head] if head else [])
        if prev is not None and head and head != prev.head and head not in parents:
            parents.append(head)
        redactor = self.log.redactor  # the gate (store/redaction.py): names refused, text redacted
        check_name(redactor, "task name", task.name)
        if step:
            check_name(redactor, "step id", step)
        message, trigger = redactor.text(message), redactor.text(trigger)
        raw_state, lead = state()
        clean_state = redact_state(redactor, raw_state)
        number = (prev.number if prev else 0) + 1
        ckpt_id = new_ulid()
        kind = "light" if light else "full"
        subject = f"checkpoint {number} of {task}" + (f": {message}" if message else "")
        trailers = _trailers(ckpt_id, task, kind, trigger, step, number, baseline, head)
        commit = repo.commit(tree, parents, checkpoint_message(subject, trailers), sign=True)
        crash_point("checkpoint.objects")
        # 2. notes of that commit
        notes_msg = f"git ckpt: notes for checkpoint {number} of {task}\n"
        state_blob = dumps(clean_state).encode()
        write_notes(repo, STATE_NOTES, {commit: state_blob}, notes_msg)
        # the notes' blob ids go into the prepare event: `verify` finds a note replaced later
        notes: dict[str, JSON] = {"state": blob_id(state_blob, commit)}
        if assertions:
            body = dumps({"v": 1, "assertions": redact_assertions(redactor, assertions)}).encode()
            write_notes(repo, ASSERTION_NOTES, {commit: body}, notes_msg)
            notes["assertions"] = blob_id(body, commit)
        crash_point("checkpoint.notes")
        links: dict[str, JSON] = {"checkpoint": commit}
        if step:
            links["step"] = step
        data: dict[str, JSON] = {"kind": kind, "trigger": trigger, "number": number, "id": ckpt_id}
        data["notes"] = notes
        who = dict(actor or {})
        # 3. write-ahead record
        prepare = NewEvent("checkpoint.prepare", who, links=links, data=data)
        self.log.append(task, [*lead, prepare])
        crash_point("checkpoint.prepare")
        # 4. the commit point (the same guard the reference-transaction hook runs)
        if not self._commit_point(task, commit, old, f"git ckpt: {subject}"):
            abort = NewEvent(
                "checkpoint.abort", who, links=links, data={**data, "reason": "ref moved"}
            )
            self.log.append(task, [abort])
            return None
        crash_point("checkpoint.ref")
        made = Checkpoint(
            id=ckpt_id,
            commit=commit,
            task=task.name,
            number=number,
            kind=kind,
            trigger=trigger,
            step=step,
            baseline=baseline,
            head=head,
            subject=subject,
            time=repo.read_commit(commit).time,
            tree=tree,
            parent=old,
        )
        after = list(committed(made)) if committed is not None else []
        # 5. done
        done = NewEvent("checkpoint.commit", who, links=links, data=data)
        self.log.append(task, [done, *after])
        return made
