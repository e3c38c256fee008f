"""Resume step 2: verify the working tree against the starting checkpoint's tree.

The comparison goes through the private index (git's stat cache), so an
unchanged tree is checked at about the cost of `git status`. Each difference is:

- *regenerable*: untracked output matching `[snapshot] regenerable` in
  .agent/ckpt.toml (logs, caches, build output). It is brought back from the
  checkpoint when the checkpoint holds it, else removed and listed for
  regeneration. A file git tracks (in the user's HEAD or index) is source,
  whatever its name: many projects track files under `build/` or `*.egg-info/`.
- *own writes*: a file the agent's own logged calls wrote since the checkpoint and
  that is still as the last of them left it (`own_writes.py`: the work of a turn
  killed before its checkpoint). Kept, and named; never drift.
- *source*: everything else. Source differences need a person: `--restore`
  brings them back (a safety checkpoint first), `--accept-drift` keeps them.
- set apart, never drift: files matching `secret_paths` (a snapshot never holds
  their current content) and the project's `.agent/` files (settings and
  contracts are never reverted: a contract changed since the checkpoint is
  kept and reported, design section 3).

`verify_step` returns what it found *and did*, file by file, for the brief and
the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from git_agentckpt.git.compare import compare_worktree
from git_agentckpt.git.convert import checkout_bytes
from git_agentckpt.git.repo import Change, GitRepo, TreeFile
from git_agentckpt.git.safe_write import SafeWriter
from git_agentckpt.git.tree_check import check_tree
from git_agentckpt.git.worktree import GITLINK, snapshot_tree
from git_agentckpt.globs import match_any, match_excluded
from git_agentckpt.model import JSON
from git_agentckpt.recovery.own_writes import explained
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.restoring import AGENT_DIR, RestoreResult

if TYPE_CHECKING:
    from git_agentckpt.store.workspace import Workspace

_VERB = {"A": "added", "D": "deleted", "M": "modified", "T": "modified"}


@dataclass
class Verification:
    tree: str  # the working tree as it was found
    source: list[dict[str, str]] = field(default_factory=list)
    regenerable: list[dict[str, str]] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    brought_back: list[str] = field(default_factory=list)  # regenerable, from the checkpoint
    to_regenerate: list[str] = field(default_factory=list)
    secret_left: list[str] = field(default_factory=list)  # secret paths: never drift
    agent_kept: list[str] = field(default_factory=list)  # .agent/ files: never reverted
    own_writes: list[dict[str, str]] = field(default_factory=list)  # the agent's: kept

    @property
    def clean(self) -> bool:
        return not self.source

    def to_json(self) -> dict[str, JSON]:
        return {
            "clean": self.clean,
            "source_drift": list(self.source),
            "regenerable_drift": list(self.regenerable),
            "cleaned": self.cleaned,
            "brought_back": self.brought_back,
            "to_regenerate": self.to_regenerate,
            "secret_paths_left": self.secret_left,
            "agent_files_kept": self.agent_kept,
            "own_writes": list(self.own_writes),
        }


@dataclass(frozen=True)
class FileAction:
    """One thing recovery did (or deliberately did not do) to one file."""

    path: str
    action: str  # restored | deleted | cleaned | brought back | kept | checked out | left
    why: str  # restore | accept drift | own logged write | rollback | regenerable |
    # secret_paths | .agent (a submodule left as it was: why, e.g. "dirty submodule")

    def to_json(self) -> dict[str, JSON]:
        return {"path": self.path, "action": self.action, "why": self.why}


@dataclass
class VerifyStep:
    """Step 2: what verification found, the decision taken, and every file it touched."""

    found: Verification
    decision: str | None = None  # None | "restore" | "accept_drift"
    files: list[FileAction] = field(default_factory=list)
    safety: Checkpoint | None = None  # undoes a restore
    after: Verification | None = None  # the working tree once restored

    @property
    def needs_person(self) -> bool:
        """Source drift nobody decided on, or that a restore could not bring back (a
        submodule it left): the drifted tree is never recorded as the start."""
        if self.decision == "accept_drift":
            return False
        return not self.final.clean

    def stop_message(self, start_id: str) -> str:
        """Why the resume stops for a person, and what to run next."""
        left = [f for f in self.files if f.action == "left"]
        if self.decision == "restore" and left:
            named = "; ".join(f"{f.path} ({f.why})" for f in left)
            return (
                f"restore left {len(left)} submodule(s) off checkpoint {start_id}: {named}; "
                "commit or stash the submodule's changes (or fetch the commit into it) and "
                "rerun with --restore, or keep it as it is with --accept-drift"
            )
        if self.decision == "restore":
            n = len(self.final.source)
            return (
                f"{n} source file(s) still differ from checkpoint {start_id} after the restore: "
                "look at them, then resume again or keep them with --accept-drift"
            )
        n = len(self.found.source)
        return (
            f"{n} source file(s) differ from checkpoint {start_id}: rerun with --restore "
            "(bring them back) or --accept-drift (keep them)"
        )

    @property
    def final(self) -> Verification:
        return self.after or self.found

    def to_json(self) -> dict[str, JSON]:
        return {
            **self.found.to_json(),
            "decision": self.decision,
            "files": [f.to_json() for f in self.files],
            "safety_checkpoint": self.safety.to_json() if self.safety else None,
            "after_restore": self.after.to_json() if self.after else None,
        }


def is_agent_file(path: str) -> bool:
    return path == AGENT_DIR or path.startswith(AGENT_DIR + "/")


def classify(
    repo: GitRepo, changes: Sequence[Change], patterns: Sequence[str]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(source, regenerable) differences: regenerable is untracked output only."""
    source: list[dict[str, str]] = []
    regenerable: list[dict[str, str]] = []
    for ch in changes:
        item = {"path": ch.path, "change": _VERB.get(ch.status, "modified")}
        output = match_any(patterns, ch.path) and not repo.head_tracks(ch.path)
        (regenerable if output else source).append(item)
    return source, regenerable


def verify_workspace(
    repo: GitRepo,
    expected_tree: str,
    regenerable: Sequence[str],
    secret_paths: Sequence[str],
    *,
    clean: bool,
) -> Verification:
    """Compare the working tree with `expected_tree`; optionally settle regenerable drift
    (bring back what the checkpoint holds, remove the rest)."""
    changes, current = compare_worktree(repo, expected_tree, secret_paths)
    # Secret files: the private index never reads them, but the expected tree may hold
    # them (HEAD's blob then, or anything in a checkpoint another clone made): set apart.
    secret = {c.path for c in changes if match_excluded(secret_paths, c.path)}
    agent = {c.path for c in changes if is_agent_file(c.path) and c.path not in secret}
    rest = [c for c in changes if c.path not in secret and c.path not in agent]
    source, regen = classify(repo, rest, regenerable)
    v = Verification(tree=current or "", source=source, regenerable=regen)
    v.secret_left, v.agent_kept = sorted(secret), sorted(agent)
    if clean and regen:
        _settle_regenerable(repo, expected_tree, v)
    else:
        v.to_regenerate = [item["path"] for item in regen]
    if v.cleaned or v.brought_back:
        v.tree = ""  # the tree changed: `ensure_tree` snapshots it when needed
    return v


def _settle_regenerable(repo: GitRepo, expected_tree: str, v: Verification) -> None:
    held = {item["path"]: repo.tree_entry(expected_tree, item["path"]) for item in v.regenerable}
    if any(held.values()):
        check_tree(repo, expected_tree, repo.workdir, f"tree {expected_tree[:12]}")
    back = [TreeFile(p, e[0], e[1]) for p, e in held.items() if e is not None and e[1] != GITLINK]
    # the bytes git checkout would write (filters, line endings), converted before any write
    with checkout_bytes(repo, back, expected_tree) as data, SafeWriter(repo.workdir) as writer:
        for item in v.regenerable:
            path, entry = item["path"], held[item["path"]]
            if entry is not None and entry[1] != GITLINK:
                writer.write(path, data.read(path, entry[0]), entry[1])
                v.brought_back.append(path)
            elif item["change"] == "deleted":
                v.to_regenerate.append(path)
            elif writer.remove(path, prune=False):
                v.cleaned.append(path)
                v.to_regenerate.append(path)


def ensure_tree(repo: GitRepo, v: Verification, secret_paths: Sequence[str]) -> str:
    """The working tree as a tree: known when it was clean, else snapshotted now."""
    if not v.tree:
        v.tree = snapshot_tree(repo, secret_paths)
    return v.tree


def _actions(v: Verification) -> list[FileAction]:
    out = [FileAction(p, "cleaned", "regenerable") for p in v.cleaned]
    out += [FileAction(p, "brought back", "regenerable") for p in v.brought_back]
    out += [FileAction(p, "kept", "secret_paths") for p in v.secret_left]
    out += [FileAction(p, "kept", ".agent") for p in v.agent_kept]
    return out


def restore_actions(restored: RestoreResult, why: str) -> list[FileAction]:
    """The files a restore changed, as actions for the brief."""
    out = [FileAction(p, "restored", why) for p in restored.written]
    out += [FileAction(p, "deleted", why) for p in restored.deleted]
    out += [FileAction(s.path, s.action, s.why if s.left else why) for s in restored.submodules]
    out += [FileAction(p, "kept", "secret_paths") for p in restored.secret]
    out += [FileAction(p, "kept", ".agent") for p in restored.agent_kept]
    return out


def _set_apart_own_writes(ws: Workspace, target: Checkpoint, v: Verification) -> None:
    """Move out of the source drift what the agent's own logged calls since `target`
    wrote and left as it is."""
    if not v.source:
        return
    events = ws.log.iter_back_marked(TaskName(target.task))
    own = explained(events, target.commit, [d["path"] for d in v.source], ws.repo.workdir)
    v.own_writes = [d for d in v.source if d["path"] in own]
    v.source = [d for d in v.source if d["path"] not in own]


def verify_step(
    ws: Workspace, target: Checkpoint, *, restore: bool, accept_drift: bool
) -> VerifyStep:
    """Verify against `target`; restore, accept or stop (`needs_person`) on source drift."""
    settings = ws.settings
    found = verify_workspace(
        ws.repo, target.tree, settings.regenerable, settings.secret_paths, clean=True
    )
    step = VerifyStep(found, files=_actions(found))
    if not (restore or accept_drift):  # a person's decision covers every file
        _set_apart_own_writes(ws, target, found)
        step.files += [FileAction(d["path"], "kept", "own logged write") for d in found.own_writes]
    if found.clean:
        return step
    if restore:
        restored = ws.restore(target.commit)
        step.decision, step.safety = "restore", restored.safety
        step.files += restore_actions(restored, "restore")
        step.after = verify_workspace(
            ws.repo, target.tree, settings.regenerable, settings.secret_paths, clean=True
        )
        step.files += _actions(step.after)
    elif accept_drift:
        step.decision = "accept_drift"
        step.files += [FileAction(d["path"], "kept", "accept drift") for d in found.source]
    return step
