"""Snapshots in O(changes): `git add -A` on the paths the daemon's watcher saw change.

In a daemon child (`git/watch_view.py`, `daemon/barrier.py`), a snapshot does not make git look at
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

import contextlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from git_agentckpt.git import object_batch, unchanged, watch_view
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git
from git_agentckpt.globs import match_excluded

MAX_PATHSPECS = 2_000
_TREE = 0o040000


@dataclass(frozen=True)
class Plan:
    """What the watcher allows for this snapshot: `paths` to add (None: scan all),
    the view to stamp the result with (None: no watcher), and why a full scan."""

    paths: list[str] | None
    view: watch_view.WatchView | None
    stamp: watch_view.Stamp | None
    reason: str = ""


def split_index(repo: GitRepo, config: Sequence[str]) -> list[str]:
    """In the daemon the private index is split (`core.splitIndex`): a write rewrites
    only the entries changed since the shared part, not the whole index (at 250k files
    the index is 22 MB, and each write hashes all of it). The shared part lives in the
    git dir as `sharedindex.<sha1>`; git expires unused ones after two weeks, and a
    private index whose shared part went is rebuilt from the user's index. Not with a
    sparse index (`index.sparse`): git refuses to split one."""
    if repo.config_bool("index.sparse", False):
        return list(config)
    return ["core.splitIndex=true" if c == "core.splitIndex=false" else c for c in config]


def link_shared_index(agent_dir: str) -> None:
    """git writes a split index's shared part into the git dir, and looks for it there
    or next to the index. A command run with another git dir (the shadow of
    verification, `git/shadow.py`) finds it only next to the index: link each one
    there, and drop the links whose file git expired."""
    git_dir = os.path.dirname(agent_dir)
    try:
        shared = {n for n in os.listdir(git_dir) if n.startswith("sharedindex.")}
        linked = {n for n in os.listdir(agent_dir) if n.startswith("sharedindex.")}
    except OSError:
        return
    for name in shared - linked:
        with contextlib.suppress(OSError):
            os.symlink(os.path.join("..", name), os.path.join(agent_dir, name))
    for name in linked - shared:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(agent_dir, name))


def plan(repo: GitRepo, agent_dir: str, seeded: bool, sparse: bool) -> Plan:
    live = watch_view.active_for(repo.workdir)
    if live is None:
        return Plan(None, None, None)
    view = live.view()
    if view is None:
        return Plan(None, None, None, "the watcher is not ready")
    stamp = watch_view.read_stamp(agent_dir)
    reason = _full_scan_reason(agent_dir, view, stamp, seeded, sparse)
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
    view: watch_view.WatchView,
    stamp: watch_view.Stamp | None,
    seeded: bool,
    sparse: bool,
) -> str:
    if stamp is None or stamp.watcher_id != view.watcher_id:
        return "first snapshot since the daemon started"
    if sparse:
        return "a sparse checkout"
    if stamp.index != unchanged.index_file_stamp(agent_dir):
        return "the private index was written outside the daemon"
    if seeded:
        return "the user's index changed (re-seeded)"
    if stamp.rules != unchanged.excludes_digest(agent_dir):
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


@dataclass
class Update:
    """What `update_paths` gave git, for the steps after `add` (secrets, large files,
    skipped entries), as `git add --verbose` would name them or more."""

    added: list[str]
    removed: list[str]


def update_paths(
    repo: GitRepo,
    agent_dir: str,
    env: Mapping[str, str],
    config: Sequence[str],
    tree: str,
    paths: Sequence[str],
    secret_paths: Sequence[str],
) -> Update | None:
    """`git add -A` on `paths`, done as git's own `update-index --add --remove --replace`
    on the files they name (read from `tree`, the private index's content, and the
    disk), with `check-ignore --no-index` deciding which new files git would skip.
    Neither reads the index's name hash as `add` does (about 50 ms at 250k files).
    None when the caller must scan in full (git refused, or an odd case)."""
    try:
        take, drop, new, became_dirs = classify(repo, tree, paths)
        if secret_paths:  # tracked secrets keep their pinned blob; new ones are excluded
            take = [p for p in take if not match_excluded(secret_paths, p)]
        take += not_ignored(repo, config, new)
    except (OSError, ValueError, UnicodeError) as exc:
        watch_view.log_line(agent_dir, f"full scan: cannot list the changed paths ({exc})")
        return None
    kept = set(take)
    drop = [p for p in set(drop) - kept if not _below(p, kept)]  # --replace drops those
    # entries git would look for through a link or a file, and files that became
    # directories (named, or found below a changed directory: a link `d/f` that is a
    # directory now): removed by name first (`--force-remove` does not look at the disk)
    top = repo.workdir
    forced = sorted({*became_dirs, *(p for p in drop if _through_link(top, p) or _is_dir(top, p))})
    if forced and not _run_update(repo, agent_dir, env, config, ["--force-remove"], forced):
        return None
    drop = [p for p in drop if p not in set(forced)]
    todo = sorted(kept) + sorted(drop)
    if not todo:
        return Update([], [])
    if not _run_update(repo, agent_dir, env, config, ["--add", "--remove", "--replace"], todo):
        return None
    # `--verbose` says "add" for removals too: the lists are ours
    return Update(sorted(kept), sorted(drop))


def _run_update(
    repo: GitRepo,
    agent_dir: str,
    env: Mapping[str, str],
    config: Sequence[str],
    flags: Sequence[str],
    paths: Sequence[str],
) -> bool:
    proc = run_git(
        [*config, "update-index", *flags, "-z", "--stdin"],
        cwd=repo.workdir,
        env=env,
        input=b"".join(os.fsencode(p) + b"\0" for p in paths),
        check=False,
    )
    if proc.returncode != 0:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        watch_view.log_line(
            agent_dir, "full scan: git refused the changed paths: " + " ".join(first)
        )
    return proc.returncode == 0


def classify(
    repo: GitRepo, tree: str, paths: Sequence[str]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(tracked paths to update, paths to drop, untracked candidates, files that
    became directories)."""
    take: list[str] = []
    drop: list[str] = []
    new: list[str] = []
    became_dirs: list[str] = []
    for path in paths:
        entry = repo.tree_entry(tree, path)
        was_dir = entry is not None and entry[1] == _TREE
        try:
            mode = os.lstat(os.path.join(repo.workdir, path)).st_mode
        except (FileNotFoundError, NotADirectoryError):
            drop.append(path)
            if was_dir and entry is not None:
                drop += _files_under(repo, entry[0], path)
            continue
        if was_dir and entry is not None and not stat.S_ISDIR(mode):
            drop += _files_under(repo, entry[0], path)  # a directory became a file or link
        if not stat.S_ISDIR(mode) or os.path.lexists(os.path.join(repo.workdir, path, ".git")):
            (take if entry is not None and not was_dir else new).append(path)
            continue
        if entry is not None and not was_dir:
            became_dirs.append(path)  # a file became a directory: --replace drops the file
            entry = None
        known = set(_files_under(repo, entry[0], path)) if entry is not None else set()
        on_disk = _walk(repo.workdir, path)
        take += [p for p in on_disk if p in known]
        new += [p for p in on_disk if p not in known]
        drop += sorted(known - set(on_disk))
    return take, drop, new, became_dirs


def _below(path: str, dirs: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:i]) in dirs for i in range(1, len(parts)))


def _is_dir(workdir: str, path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(workdir, path)).st_mode)
    except OSError:
        return False


def _through_link(workdir: str, path: str) -> bool:
    """Whether an ancestor of `path` on disk is not a directory (a link, a file): git
    would look through it instead of seeing the path gone."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        try:
            mode = os.lstat(os.path.join(workdir, *parts[:i])).st_mode
        except OSError:
            return False
        if not stat.S_ISDIR(mode):
            return True
    return False


def _files_under(repo: GitRepo, tree: str, prefix: str) -> list[str]:
    return [f"{prefix}/{f.path}" for f in repo.tree_files(tree)]


def _walk(workdir: str, top: str) -> list[str]:
    """Files, links and nested repositories below `top` (a directory), as git lists them."""
    out: list[str] = []
    stack = [top]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(workdir, rel)) as it:
            for entry in it:
                if entry.name == ".git":
                    continue
                path = f"{rel}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if os.path.lexists(os.path.join(entry.path, ".git")):
                        out.append(path)  # a nested repository: one gitlink
                    else:
                        stack.append(path)
                else:
                    out.append(path)
    return out


def not_ignored(repo: GitRepo, config: Sequence[str], paths: Sequence[str]) -> list[str]:
    """The untracked `paths` git's ignore rules keep (`check-ignore --no-index`: the
    same rules as `add`, a directory's exclusion included, without reading the index)."""
    if not paths:
        return []
    proc = run_git(
        [*config, "check-ignore", "--no-index", "-z", "--stdin"],
        cwd=repo.workdir,
        input=b"".join(os.fsencode(p) + b"\0" for p in paths),
        check=False,
        reads_objects=False,  # ignore rules from files on disk only (`--no-index`)
    )
    if proc.returncode not in (0, 1):
        raise ValueError("git check-ignore failed")
    ignored = {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}
    return [p for p in paths if p not in ignored]


def finish(agent_dir: str, chosen: Plan, tree: str, behind: Sequence[str] = ()) -> None:
    """Stamp the snapshot just written (under the private index's flock); `behind`: the
    paths where the private index does not hold `tree`'s entries (`direct_tree.py`)."""
    if chosen.view is None:
        return
    link_shared_index(agent_dir)
    index = unchanged.index_file_stamp(agent_dir) or ""
    rules = unchanged.excludes_digest(agent_dir)
    stamp = watch_view.Stamp(
        chosen.view.watcher_id, chosen.view.seq, tree, index, rules, tuple(sorted(behind))
    )
    if stamp == chosen.stamp:
        return  # what the file holds already (a snapshot of no change): no write
    # the stamp names the tree: it is written once the tree is on disk. Until then the
    # last stamp holds, and stays true: it only sees fewer changes taken in
    object_batch.when_on_disk(lambda: watch_view.write_stamp(agent_dir, stamp))


def unchanged_tree(agent_dir: str, chosen: Plan) -> str | None:
    """The stamp's tree when the snapshot changed nothing in the private index."""
    if chosen.stamp is None or chosen.paths is None:
        return None
    if unchanged.index_file_stamp(agent_dir) != chosen.stamp.index:
        return None
    return chosen.stamp.tree
