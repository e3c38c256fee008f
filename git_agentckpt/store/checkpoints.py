"""Checkpoint commits under `refs/agent/checkpoints/<task>`, created in write-ahead order.

1. write the snapshot tree and the commit object (nothing points at them yet);
2. write the notes of that commit (state, assertions);
3. append `checkpoint.prepare` naming the commit;
4. compare-and-swap the checkpoint ref from its old value: the commit point;
5. append `checkpoint.commit`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import CkptError, ConflictError, CorruptError, NotFound
from git_agentckpt.git.large import assertion as large_assertion
from git_agentckpt.git.notes import note_id, notes_commit, read_note
from git_agentckpt.git.ref_moves import ObjectGone
from git_agentckpt.git.ref_txn import RefMove
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

    @contextlib.contextmanager
    def locked(self, task: TaskName) -> Iterator[None]:
        """The task's lock: checkpoints and state-changing events of one task, one at a
        time (released by the kernel if the holder is killed)."""
        from git_agentckpt.git.worktree import locked  # writes only: not at start-up

        lock_dir = os.path.join(self.repo.common_dir, "agent", "locks")
        with locked(os.path.join(lock_dir, task.name.replace("/", "%") + ".flock")):
            yield

    def create(self, task: TaskName, draft: Draft) -> Checkpoint:
        """Create one checkpoint: its commit, notes and events, and the ref moves that make
        them visible, as one transaction (see the module docstring), under the task's lock.
        A transaction that finds a ref moved (another writer: an event appended, a note
        written) is computed again from what it reads then; the snapshot is taken once."""
        # its objects go to disk as one pack, each part before a ref names it
        with self.locked(task), self.repo.batched_objects():
            snap = _Snapshot(self, draft)
            return retry(
                lambda: self._attempt(task, draft, snap),
                what=f"checkpoint of {task}",
                tries=None,
                deadline_seconds=LOCK_WAIT_SECONDS,
                max_delay=0.1,
                exhausted=lambda: self._stuck(task),
            )

    def _attempt(self, task: TaskName, draft: Draft, snap: _Snapshot) -> Checkpoint | None:
        """One try; a snapshot whose objects a concurrent prune took is taken again."""
        try:
            return self._create_once(task, draft, snap)
        except ObjectGone:
            snap.forget()
            return None

    def _stuck(self, task: TaskName) -> ConflictError:
        """Why a checkpoint's transaction never went through: a lock another process holds
        (a killed writer's is broken once it is stale), or refs that kept moving."""
        for ref in (task.checkpoints_ref, task.events_ref, STATE_NOTES, ASSERTION_NOTES):
            if os.path.exists(os.path.join(self.repo.common_dir, ref + ".lock")):
                return ConflictError(
                    f"{ref} stayed locked for {LOCK_WAIT_SECONDS:.0f} s",
                    hint=f"nothing was committed; if no git process is running, run "
                    f"`git ckpt doctor` (or remove .git/{ref}.lock)",
                )
        return ConflictError(
            f"the refs of task {task} kept moving under another writer",
            hint="nothing was committed; run the command again",
        )

    def _create_once(self, task: TaskName, draft: Draft, snap: _Snapshot) -> Checkpoint | None:
        repo = self.repo
        plan = draft.plan()  # the state at the log tip it read, under the lock
        old = plan.checkpoint_tip
        prev = self.get(old) if old else None
        head = repo.head()
        baseline = prev.baseline if prev else head
        tree, assertions = snap.tree(prev, baseline)
        parents = [old] if old else ([head] if head else [])
        if prev is not None and head and head != prev.head and head not in parents:
            parents.append(head)
        redactor = self.log.redactor  # the gate (store/redaction.py): names refused, text redacted
        check_name(redactor, "task name", task.name)
        if draft.step:
            check_name(redactor, "step id", draft.step)
        message, trigger = redactor.text(draft.message), redactor.text(draft.trigger)
        number = (prev.number if prev else 0) + 1
        kind = "light" if draft.light else "full"
        subject = f"checkpoint {number} of {task}" + (f": {message}" if message else "")
        trailers = _trailers(new_ulid(), task, kind, trigger, draft.step, number, baseline, head)
        commit = repo.commit(tree, parents, checkpoint_message(subject, trailers), sign=True)
        made = Checkpoint(
            id=trailers["Checkpoint-Id"],
            commit=commit,
            task=task.name,
            number=number,
            kind=kind,
            trigger=trigger,
            step=draft.step,
            baseline=baseline,
            head=head,
            subject=subject,
            time=repo.read_commit(commit).time,
            tree=tree,
            parent=old,
        )
        bodies, notes = self._note_bodies(made, redact_state(redactor, plan.state), assertions)
        extra = draft.extra(made) if draft.extra is not None else Extra()
        links: dict[str, JSON] = {"checkpoint": commit}
        if draft.step:
            links["step"] = draft.step
        data: dict[str, JSON] = {"kind": kind, "trigger": trigger, "number": number}
        data.update({"id": made.id, "notes": notes})
        who = dict(draft.actor or {})
        prepare = NewEvent("checkpoint.prepare", who, links=links, data=data)
        done = NewEvent("checkpoint.commit", who, links=links, data=data)
        batch = self.log.batch(task, [*plan.lead, prepare, done, *extra.events])
        log_commit, _ = batch.commit_on(plan.events_tip)
        moves = computed_moves(repo, extra.refs)
        moves.append(RefMove(task.events_ref, log_commit, plan.events_tip))
        moves += snap.pin(tree)
        moves.append(RefMove(task.checkpoints_ref, commit, old))  # last: the commit point
        crash_point("checkpoint.objects")
        self._guard(task, made, old, (plan.events_tip, log_commit))
        # every task's checkpoints write the same notes refs: their commits are made on
        # the tips read under one lock of the repository's, and moved before it is let go
        with self.locked_notes():
            notes_msg = f"git ckpt: notes for checkpoint {number} of {task}\n"
            moves = [*computed_moves(repo, _notes_of(repo, made, bodies, notes_msg)), *moves]
            if not repo.cas_refs(moves, f"git ckpt: {subject}"):
                return None
        crash_point("checkpoint.ref")
        self.log.appended(task)
        return made

    def _note_bodies(
        self, made: Checkpoint, state: Mapping[str, JSON], assertions: Sequence[JSON]
    ) -> tuple[dict[str, bytes], dict[str, JSON]]:
        """The notes of checkpoint `made` (state, and assertions when it has any) by notes
        ref, and their blob ids, which its prepare event binds (`verify` finds a note
        replaced later)."""
        bodies = {STATE_NOTES: dumps(state).encode()}
        if assertions:
            redacted = redact_assertions(self.log.redactor, assertions)
            bodies[ASSERTION_NOTES] = dumps({"v": 1, "assertions": redacted}).encode()
        bound: dict[str, JSON] = {
            "state" if ref == STATE_NOTES else "assertions": blob_id(body, made.commit)
            for ref, body in bodies.items()
        }
        return bodies, bound

    @contextlib.contextmanager
    def locked_notes(self) -> Iterator[None]:
        """The repository's lock on the notes refs every task writes (held for one
        transaction: a few milliseconds), so that concurrent checkpoints of many tasks
        queue instead of racing on them."""
        from git_agentckpt.git.worktree import locked  # writes only: not at start-up

        # not under agent/locks/, where each task's lock is named after the task
        with locked(os.path.join(self.repo.common_dir, "agent", "notes.flock")):
            yield

    def _guard(
        self, task: TaskName, made: Checkpoint, old: str | None, log: tuple[str | None, str]
    ) -> None:
        """The guard every checkpoint move passes (the one the reference-transaction hook
        runs for other writers), with the log's new tip of the same transaction."""
        updates = [
            Update(log[0] or ZERO, log[1], task.events_ref),
            Update(old or ZERO, made.commit, task.checkpoints_ref),
        ]
        problems = check_updates(self.repo, updates)
        if problems:
            raise CorruptError("refusing to move the checkpoint ref: " + "; ".join(problems))


@dataclass(frozen=True)
class Plan:
    """What a checkpoint records, decided under the task's lock: the state at the log tip
    `events_tip` and checkpoint `checkpoint_tip` (the transaction expects both refs
    there), and the events logged before its `checkpoint.prepare` (a `task.start`, a
    `step.end`, a resume's `recovery.*`)."""

    state: Mapping[str, JSON]
    lead: Sequence[NewEvent]
    events_tip: str | None
    checkpoint_tip: str | None


@dataclass(frozen=True)
class Extra:
    """What a checkpoint's transaction carries besides itself, once its commit is known (a
    resume: its report, and `recovery.ready`): events logged after its
    `checkpoint.commit`, and refs moved with it, each computed from its tip."""

    events: Sequence[NewEvent] = ()
    refs: Mapping[str, Callable[[str | None], str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Draft:
    """One checkpoint as its caller asks for it (`CheckpointStore.create`)."""

    message: str
    light: bool
    trigger: str
    step: str | None
    plan: Callable[[], Plan]  # called under the lock, and again on each retry
    assertions: Sequence[JSON] = ()
    secret_paths: Sequence[str] = ()
    actor: Mapping[str, JSON] | None = None
    tree: str | None = None  # the working tree already proven equal to the disk
    extra: Callable[[Checkpoint], Extra] | None = None


Compute = Callable[[str | None], str]


def computed_moves(repo: GitRepo, refs: Mapping[str, Compute] | None) -> list[RefMove]:
    """A move of each ref of `refs` from its tip now to what its computation makes of it."""
    moves = []
    for ref, compute in (refs or {}).items():
        tip = repo.read_ref(ref)
        moves.append(RefMove(ref, compute(tip), tip))
    return moves


def _notes_of(
    repo: GitRepo, made: Checkpoint, bodies: Mapping[str, bytes], message: str
) -> dict[str, Compute]:
    """The computation of each notes ref's next commit: `made`'s note added on its tip."""

    def adding(body: bytes) -> Compute:
        return lambda tip: notes_commit(repo, tip, {made.commit: body}, message)

    return {ref: adding(body) for ref, body in bodies.items()}


class _Snapshot:
    """A checkpoint's tree, taken once whatever the retries: its parent's for a light one
    (no disk scan), else a snapshot (or the draft's proven tree); large files the snapshot
    leaves out are pinned as assertions instead."""

    def __init__(self, store: CheckpointStore, draft: Draft) -> None:
        self.store = store
        self.draft = draft
        self.proven = draft.tree  # the draft's tree, until its objects are found gone
        self.full: tuple[str, Sequence[JSON]] | None = None

    def pin(self, tree: str) -> list[RefMove]:
        """The move of the work tree's snapshot pin to a full checkpoint's tree, with it
        (`worktree.pin_move`): a tree its own snapshot left in memory is pinned so."""
        from git_agentckpt.git.worktree import pin_move

        move = None if self.draft.light else pin_move(self.store.repo, tree)
        return [move] if move is not None else []

    def forget(self) -> None:
        """Objects of the snapshot were pruned before the transaction named them: snapshot
        the disk again with a private index seeded afresh (it named them too)."""
        from git_agentckpt.git.worktree import forget_private_index

        forget_private_index(self.store.repo)
        self.proven, self.full = None, None

    def tree(self, prev: Checkpoint | None, baseline: str | None) -> tuple[str, Sequence[JSON]]:
        repo, draft = self.store.repo, self.draft
        if draft.light:
            if prev is not None:
                return prev.tree, draft.assertions
            base = repo.read_commit(baseline).tree if baseline else repo.empty_tree()
            return base, draft.assertions
        if self.full is None:
            from git_agentckpt.git.worktree import large_files

            tree = self.proven or snapshot_with_progress(repo, draft.secret_paths)
            large = [large_assertion(f) for f in large_files(repo)]
            self.full = tree, by_id([*draft.assertions, *large])
        return self.full


def by_id(assertions: Sequence[JSON]) -> list[JSON]:
    """Assertions with one per id, the last given of each (a pin taken now replaces the
    one a resume carried forward), in the order the ids first came."""
    kept: dict[str, JSON] = {}
    for item in assertions:
        kept[str(item.get("id")) if isinstance(item, dict) else repr(item)] = item
    return list(kept.values())
