"""Resume step 3: run the assertions stored with a checkpoint; a controlled rollback.

Assertions are data (`refs/notes/agent/assertions`): declarative checks run
here in-process; `command` checks run only when this user trusts that exact
argv (see contracts/trust.py), otherwise they are reported `untrusted`.

When assertions of the starting checkpoint fail (`assertions_step`):

- a file the person kept with `--accept-drift` is accepted, not a failure: the
  resume checkpoint pins its new content, and the brief names the done steps
  that ran with the old one (the model decides whether to redo them);
- a large file (pinned by sha256, never stored) cannot be brought back by any
  rollback: the resume stops for a person (exit 11), naming old and new sha256;
- otherwise the newest earlier checkpoint (never one from the middle of a step,
  never a safety checkpoint) whose assertions *cover every failed file* and
  pass is the rollback target: a checkpoint that asserts nothing about a file
  is no evidence about it. Candidates are tested on the files their assertions
  name (taken from their own tree, or from the working tree for files no
  snapshot holds: ignored, large), never on a full export, unless they hold a
  check that needs the whole tree (a command, a path rule). No target: the
  resume stops for a person (exit 11) naming each file, its pinned and current
  sha256, and the done steps that ran with the pinned value.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from git_agentckpt.contracts.checks import CheckContext, CheckResult, run_check
from git_agentckpt.contracts.schema import Assertion, Check, ContractError, parse_assertions
from git_agentckpt.git.convert import REGULAR, CheckoutBytes, checkout_bytes
from git_agentckpt.git.repo import GitRepo, TreeFile
from git_agentckpt.git.restore import export_tree
from git_agentckpt.git.tree_check import check_tree
from git_agentckpt.git.worktree import changed_paths
from git_agentckpt.model import JSON
from git_agentckpt.recovery.bound_notes import BoundNotes
from git_agentckpt.recovery.verify import FileAction, VerifyStep, restore_actions
from git_agentckpt.store.checkpoints import SAFETY_TRIGGER, STEP_END_TRIGGER, Checkpoint
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.tools import sha256_file

if TYPE_CHECKING:
    from git_agentckpt.store.workspace import Workspace

CommandRunner = Callable[[Check], CheckResult]
FAILING = ("fail", "error")


@dataclass
class AssertionRun:
    checkpoint: str
    results: list[dict[str, JSON]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(r["status"] in FAILING for r in self.results)

    def to_json(self) -> dict[str, JSON]:
        return {"checkpoint": self.checkpoint, "passed": self.passed, "results": self.results}


def _changed(repo: GitRepo, ckpt: Checkpoint, tree: str) -> frozenset[str]:
    base = repo.empty_tree() if ckpt.baseline is None else repo.read_commit(ckpt.baseline).tree
    return changed_paths(repo, base, tree)


def run_assertions(
    notes: BoundNotes,
    ckpt: Checkpoint,
    workdir: str,
    tree: str,
    runner: CommandRunner | None,
) -> AssertionRun:
    """Evaluate `ckpt`'s assertions against the files in `workdir` (whose tree is `tree`)."""
    out = AssertionRun(ckpt.commit)
    raw = notes.assertions(ckpt)
    if not raw:
        return out
    try:
        assertions = parse_assertions(raw, source=f"assertions of {ckpt.id}")
    except ContractError as exc:
        out.results.append({"id": "(note)", "status": "error", "detail": exc.one_line()})
        return out
    changed = _changed(notes.store.repo, ckpt, tree)
    ctx = CheckContext(
        workdir=Path(workdir), changed_paths=changed, written_paths=changed, command_runner=runner
    )
    for a in assertions:
        result = run_check(a.check, ctx)
        out.results.append(
            {"id": a.id, "kind": a.check.kind, "status": result.status, "detail": result.detail}
        )
    return out


FILE_KINDS = (
    "file_exists",
    "file_contains",
    "file_matches",
    "file_sha256",
    "json_value",
    "yaml_value",
    "toml_value",
)
LARGE_PREFIX = "large-"


@dataclass(frozen=True)
class FailedInput:
    """A failed assertion about one file, with what was pinned and what is there now."""

    id: str
    file: str | None
    pinned: str | None  # the sha256 the checkpoint pinned (file_sha256 checks)
    now: str | None  # the file's sha256 now (None: missing)
    detail: str
    used_by: tuple[str, ...] = ()  # done steps whose step-end checkpoint pinned `pinned`

    def to_json(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "file": self.file,
            "pinned_sha256": self.pinned,
            "sha256_now": self.now,
            "detail": self.detail,
            "done_steps_that_used_the_pinned_value": list(self.used_by),
        }

    def one_line(self) -> str:
        what = self.file or self.id
        if self.pinned:
            now = self.now[:12] if self.now else "missing"
            line = f"{what} (sha256 pinned {self.pinned[:12]}, now {now})"
        else:
            line = f"{what}: {self.detail}"
        if self.used_by:
            line += f"; done steps that ran with the pinned value: {', '.join(self.used_by)}"
        return line


@dataclass
class Rollback:
    tried: list[AssertionRun]
    target: Checkpoint | None
    files: list[FileAction] = field(default_factory=list)
    safety: Checkpoint | None = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "tried": [t.to_json() for t in self.tried],
            "target": self.target.to_json() if self.target else None,
            "files": [f.to_json() for f in self.files],
            "safety_checkpoint": self.safety.to_json() if self.safety else None,
        }


@dataclass
class AssertionStep:
    """Step 3: the starting checkpoint's assertions, what was accepted, rolled back or not."""

    run: AssertionRun
    notes: BoundNotes  # the notes acted on; `notes.ignored`: the ones set aside
    failed: list[FailedInput] = field(default_factory=list)  # not accepted
    accepted: list[FailedInput] = field(default_factory=list)  # kept by --accept-drift
    rollback: Rollback | None = None
    stopped: str | None = None  # why a person must decide (exit 11)

    @property
    def passed(self) -> bool:
        """Every assertion holds, or what fails was accepted by a person (re-pinned)."""
        return not self.failed and self.stopped is None

    def carried(self, source: Checkpoint) -> list[JSON]:
        """`source`'s assertions as the resume checkpoint carries them: an input a person
        accepted (`--accept-drift`) re-pinned to its value now, so that every later
        resume checks the accepted value, not the old one."""
        repinned = {f.id: f.now for f in self.accepted if f.now is not None}
        out: list[JSON] = []
        for item in self.notes.assertions(source):
            if isinstance(item, dict) and item.get("id") in repinned:
                check = {**item["check"], "sha256": repinned[str(item["id"])]}
                item = {**item, "check": check}
            out.append(item)
        return out

    def to_json(self) -> dict[str, JSON]:
        return {
            **self.run.to_json(),
            "passed": self.passed,
            "failed_inputs": [f.to_json() for f in self.failed],
            "accepted_inputs": [f.to_json() for f in self.accepted],
            "rollback": self.rollback.to_json() if self.rollback else None,
            "stopped": self.stopped,
            "notes_set_aside": list(self.notes.ignored.values()),
        }


def _file_of(check: Check) -> str | None:
    if check.kind in FILE_KINDS:
        file = check.params.get("file")
        return file if isinstance(file, str) else None
    return None


def _assertions(notes: BoundNotes, ckpt: Checkpoint) -> dict[str, Assertion]:
    """The checkpoint's assertions, validated (paths inside the tree); {} when unreadable."""
    raw = notes.assertions(ckpt)
    try:
        return {a.id: a for a in parse_assertions(raw, source=f"assertions of {ckpt.id}")}
    except ContractError:
        return {}


def _pinned(item: Assertion | None) -> str | None:
    if item is not None and item.check.kind == "file_sha256":
        sha = item.check.params.get("sha256")
        return sha if isinstance(sha, str) else None
    return None


def _sha_now(workdir: str, file: str | None) -> str | None:
    if file is None:
        return None
    try:
        return sha256_file(os.path.join(workdir, file))
    except OSError:
        return None


def _steps_that_used(
    notes: BoundNotes, start: Checkpoint, file: str, sha: str | None
) -> tuple[str, ...]:
    """Done steps (up to `start`) whose step-end checkpoint pinned `file` at `sha`."""
    if sha is None:
        return ()
    out: list[str] = []
    for ckpt in notes.store.chain(TaskName(start.task), start=start.commit):
        if ckpt.trigger != STEP_END_TRIGGER or not ckpt.step or ckpt.step in out:
            continue
        for item in _assertions(notes, ckpt).values():
            if _file_of(item.check) == file and _pinned(item) == sha:
                out.append(ckpt.step)
                break
    return tuple(reversed(out))


def failed_inputs(
    notes: BoundNotes, start: Checkpoint, run: AssertionRun, workdir: str
) -> list[FailedInput]:
    """Each failing assertion of `start`, with its file, pinned and current sha256."""
    known = _assertions(notes, start)
    out: list[FailedInput] = []
    for r in run.results:
        if r["status"] not in FAILING:
            continue
        ident = str(r["id"])
        item = known.get(ident)
        file = _file_of(item.check) if item else None
        pinned = _pinned(item)
        out.append(
            FailedInput(
                ident,
                file,
                pinned,
                _sha_now(workdir, file),
                str(r.get("detail") or ""),
                _steps_that_used(notes, start, file, pinned) if file else (),
            )
        )
    return out


def _scratch_for(
    notes: BoundNotes, ckpt: Checkpoint, files: Sequence[str], workdir: str, dest: str
) -> None:
    """The files a candidate's assertions name: from its tree, with the bytes `git
    checkout` would write (filters, line endings: a sha256 pinned from the working tree
    matches them), or from the working tree when no snapshot holds them (ignored or
    large files are facts of the working tree)."""
    repo = notes.store.repo
    entries = {rel: repo.tree_entry(ckpt.tree, rel) for rel in files}
    held = [TreeFile(r, e[0], e[1]) for r, e in entries.items() if e and e[1] in REGULAR]
    with checkout_bytes(repo, held, ckpt.tree) as data:
        for rel, entry in entries.items():
            _scratch_file(rel, entry, data, workdir, dest)


def _scratch_file(
    rel: str, entry: tuple[str, int] | None, data: CheckoutBytes, workdir: str, dest: str
) -> None:
    target = os.path.join(dest, rel)
    if entry is not None and entry[1] in REGULAR:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data.read(rel, entry[0]))
    elif entry is None and os.path.isfile(os.path.join(workdir, rel)):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(workdir, rel), target)


def _test_candidate(
    notes: BoundNotes, ckpt: Checkpoint, workdir: str, runner: CommandRunner | None
) -> AssertionRun:
    known = _assertions(notes, ckpt)
    files = [f for a in known.values() if (f := _file_of(a.check)) is not None]
    whole_tree = len(files) < len(known)  # a command or a path rule needs every file
    label = f"{ckpt.id} of task {ckpt.task}"
    with tempfile.TemporaryDirectory(prefix="ckpt-rollback-") as scratch:
        if whole_tree:
            export_tree(notes.store.repo, ckpt.tree, scratch, label=label)
            files = [f for f in files if notes.store.repo.tree_entry(ckpt.tree, f) is None]
        else:
            check_tree(notes.store.repo, ckpt.tree, scratch, label)
        _scratch_for(notes, ckpt, files, workdir, scratch)
        return run_assertions(notes, ckpt, scratch, ckpt.tree, runner)


def _covers(notes: BoundNotes, ckpt: Checkpoint, failed: Sequence[FailedInput]) -> bool:
    """Whether `ckpt` asserts something about every failed file (ids for the others)."""
    known = _assertions(notes, ckpt)
    files = {_file_of(a.check) for a in known.values()}
    return all((f.file in files) if f.file else (f.id in known) for f in failed)


def find_rollback(
    notes: BoundNotes,
    start: Checkpoint,
    skip: set[str],
    failed: Sequence[FailedInput],
    workdir: str,
    runner: CommandRunner | None,
) -> tuple[Checkpoint | None, list[AssertionRun]]:
    """The newest earlier checkpoint that covers every failed input and passes."""
    tried: list[AssertionRun] = []
    for ckpt in notes.store.chain(TaskName(start.task), start=start.commit):
        if ckpt.commit == start.commit or ckpt.commit in skip:
            continue
        if ckpt.trigger == SAFETY_TRIGGER or not _covers(notes, ckpt, failed):
            continue
        run = _test_candidate(notes, ckpt, workdir, runner)
        tried.append(run)
        if run.passed:
            return ckpt, tried
    return None, tried


def assertions_step(
    ws: Workspace,
    located: tuple[Checkpoint, Checkpoint],
    tree: str,
    verified: VerifyStep,
    *,
    skip: set[str],
    no_rollback: bool,
    runner: CommandRunner | None,
    notes: BoundNotes,
) -> AssertionStep:
    """Run the assertions of the starting checkpoint on the working tree; accept, roll back
    or stop. `located`: the start, and the checkpoint in the chain that stands for it (a
    resume checkpoint carries the start's assertions, with what a person accepted
    re-pinned: those are the ones that hold). Only the notes `notes` binds are read."""
    start, source = located
    workdir = ws.repo.workdir
    run = run_assertions(notes, source, workdir, tree, runner)
    step = AssertionStep(run, notes)
    if run.passed:
        return step
    kept = {f.path for f in verified.files if f.why == "accept drift"}
    for f in failed_inputs(notes, source, run, workdir):
        (step.accepted if f.file in kept else step.failed).append(f)
    if not step.failed:
        return step
    large = [f for f in step.failed if f.id.startswith(LARGE_PREFIX)]
    if large:  # never stored: no checkpoint can bring it back
        step.stopped = "large file(s) changed since the checkpoint: " + "; ".join(
            f.one_line() for f in large
        )
        return step
    if no_rollback:
        step.stopped = "--no-rollback: " + "; ".join(f.one_line() for f in step.failed)
        return step
    target, tried = find_rollback(notes, start, skip, step.failed, workdir, runner)
    step.rollback = Rollback(tried, target)
    if target is None:
        step.stopped = (
            f"no earlier checkpoint asserts a value that holds now ({len(tried)} tried): "
            + "; ".join(f.one_line() for f in step.failed)
        )
        return step
    restored = ws.restore(target.commit)
    step.rollback.files = restore_actions(restored, "rollback")
    step.rollback.safety = restored.safety
    left = [s for s in restored.submodules if s.left]
    if left:  # the rolled-back tree is not what the working tree now holds: a person decides
        step.stopped = "rolled back, but submodule(s) left as they were: " + "; ".join(
            f"{s.path} ({s.why})" for s in left
        )
    return step
