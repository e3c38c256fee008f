"""Snapshots in O(changes): `git add -A` on the paths the daemon's watcher saw change.

In a daemon child (`git/watcher.py`), a snapshot does not make git look at
the whole tree. The stamp the last snapshot left (`.git/agent/watch.json`)
names the watcher and the last change it took in; the watcher's view gives
the paths changed after that; `git add -A` runs on those paths alone, as
literal pathspecs, so git keeps its exact semantics for them (ignore rules,
filters, modes, symlinks, nested repositories, deletions) and carries every
other entry of the private index as it was. When nothing changed at all, and
the private index is the one the stamp describes, no git runs: the stamp's
tree is the snapshot.

A path is turned into a pathspec git accepts: a path below a symbolic link,
a file or a nested repository becomes that ancestor (git refuses a pathspec
beyond a link or inside a submodule); a path that is neither on disk nor in
the last snapshot's tree (a file made and removed between two snapshots) is
dropped (git refuses a pathspec that matches nothing). Anything else git
refuses falls back to the full scan, and so do the cases the watcher cannot
vouch for, a changed `.gitignore` (it may hide or show files anywhere below
it), changed ignore rules or settings, a re-seeded private index, a sparse
checkout, and more than `MAX_PATHSPECS` paths. Each fallback is logged to
`.git/agent/watch.log`.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from git_agentckpt.git import watcher
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git

MAX_PATHSPECS = 2_000
_IGNORED_NOTE = b"\nThe following paths are ignored by one of your .gitignore files:\n"


@dataclass(frozen=True)
class Plan:
    """What the watcher allows for this snapshot: `paths` to add (None: scan all),
    the view to stamp the result with (None: no watcher), and why a full scan."""

    paths: list[str] | None
    view: watcher.WatchView | None
    stamp: watcher.Stamp | None
    reason: str = ""


def rules_digest(agent_dir: str, seeded: bool) -> str:
    """What else decides a snapshot: the excludes file (global rules, secret paths,
    large files). A re-seeded private index never matches."""
    try:
        with open(os.path.join(agent_dir, "exclude"), "rb") as fh:
            digest = hashlib.sha1(fh.read()).hexdigest()
    except OSError:
        digest = "none"
    return "reseeded" if seeded else digest


def plan(repo: GitRepo, agent_dir: str, rules: str, sparse: bool) -> Plan:
    live = watcher.active_for(repo.workdir)
    if live is None:
        return Plan(None, None, None)
    view = live.view()
    if view is None:
        return Plan(None, None, None, "the watcher is not ready")
    stamp = watcher.read_stamp(agent_dir)
    reason = _full_scan_reason(agent_dir, view, stamp, rules, sparse)
    if reason or stamp is None:
        return Plan(None, view, None, reason)
    changed = view.changes_since(stamp.seq)
    if changed is None:
        return Plan(None, view, None, "the watcher lost track (queue overflow)")
    if any(os.path.basename(p) == ".gitignore" for p in changed):
        return Plan(None, view, None, "a .gitignore changed")
    paths = pathspecs(repo, stamp.tree, changed)
    if len(paths) > MAX_PATHSPECS:
        return Plan(None, view, None, f"{len(paths)} paths changed")
    return Plan(paths, view, stamp)


def _full_scan_reason(
    agent_dir: str,
    view: watcher.WatchView,
    stamp: watcher.Stamp | None,
    rules: str,
    sparse: bool,
) -> str:
    if stamp is None or stamp.watcher_id != view.watcher_id:
        return "first snapshot since the daemon started"
    if sparse:
        return "a sparse checkout"
    if stamp.index != watcher.index_stat(os.path.join(agent_dir, "index")):
        return "the private index was written outside the daemon"
    if rules == "reseeded":
        return "the user's index changed (re-seeded)"
    if stamp.rules != rules:
        return "ignore rules or settings changed"
    return ""


def pathspecs(repo: GitRepo, tree: str, changed: Sequence[str]) -> list[str]:
    """The changed paths as pathspecs git accepts (see the module doc), outermost first,
    with the paths below another one left out."""
    chosen: set[str] = set()
    for path in changed:
        spec = _accepted_form(repo, tree, path)
        if spec is not None:
            chosen.add(spec)
    out: list[str] = []
    for spec in sorted(chosen):
        if out and (spec == out[-1] or spec.startswith(out[-1] + "/")):
            continue
        out.append(spec)
    return out


def _accepted_form(repo: GitRepo, tree: str, path: str) -> str | None:
    parts = path.split("/")
    for depth in range(1, len(parts)):
        ancestor = "/".join(parts[:depth])
        try:
            mode = os.lstat(os.path.join(repo.workdir, ancestor)).st_mode
        except OSError:
            break  # the ancestor went: the path went with it
        if not stat.S_ISDIR(mode) or os.path.lexists(os.path.join(repo.workdir, ancestor, ".git")):
            return ancestor  # a link, a file, or a nested repository: git takes it whole
    if os.path.lexists(os.path.join(repo.workdir, path)):
        return path
    try:
        known = repo.tree_entry(tree, path) is not None
    except Exception:  # an odd name libgit2 cannot look up: let git decide
        known = True
    return path if known else None


def add_paths(
    repo: GitRepo,
    agent_dir: str,
    env: Mapping[str, str],
    config: Sequence[str],
    paths: Sequence[str],
) -> subprocess.CompletedProcess[bytes] | None:
    """`git add -A --verbose` on `paths` (literal); None when git refused and the
    caller must scan in full. Naming a path the ignore rules hide makes git exit 1
    after adding the rest: that is a success here (the full scan would skip it too)."""
    proc = run_git(
        [
            "--literal-pathspecs",
            *config,
            "-c",
            "advice.addIgnoredFile=false",
            "add",
            "-A",
            "--verbose",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        cwd=repo.workdir,
        env=env,
        input=b"".join(os.fsencode(p) + b"\0" for p in paths),
        check=False,
    )
    if proc.returncode == 0:
        return proc
    if proc.returncode == 1 and _IGNORED_NOTE in b"\n" + proc.stderr:
        return proc
    first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
    watcher.log_line(agent_dir, "full scan: git refused the changed paths: " + " ".join(first))
    return None


def finish(agent_dir: str, chosen: Plan, tree: str, rules: str) -> None:
    """Stamp the snapshot just written (under the private index's flock)."""
    if chosen.view is None:
        return
    index = watcher.index_stat(os.path.join(agent_dir, "index"))
    watcher.write_stamp(
        agent_dir, watcher.Stamp(chosen.view.watcher_id, chosen.view.seq, tree, index, rules)
    )


def unchanged_tree(agent_dir: str, chosen: Plan) -> str | None:
    """The stamp's tree when the snapshot changed nothing in the private index."""
    if chosen.stamp is None or chosen.paths is None:
        return None
    if watcher.index_stat(os.path.join(agent_dir, "index")) != chosen.stamp.index:
        return None
    return chosen.stamp.tree
