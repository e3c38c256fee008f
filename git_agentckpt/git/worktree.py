"""The working tree as git sees it, through a private index (writing back: `restore.py`).

A full snapshot runs git itself (`add -A`, `write-tree`) on a private index in
`.git/agent/` seeded from the user's index with its mtime kept, and seeded again
whenever the user's index changes (`private_index.py`): a snapshot is `add -A` on
a fresh copy of the user's current index, yet unchanged files are not hashed
again and racy-git edits are still seen. In a sparse checkout `add` runs with
`--sparse` (paths outside the cone keep their blobs; `.agent/` is taken there
too). git is faster than libgit2 here (libgit2's add never writes refreshed stat
data back), and it handles nested repositories as gitlinks. Untracked secret paths are kept
out by a private excludes file, tracked ones are pinned to HEAD's blob
(`secret_files.py`), so their content never reaches the object store;
untracked files above the size cap are left out and pinned instead (`large.py`).

The private index names the blobs of the last snapshot, and later snapshots reuse
them unhashed; a snapshot no checkpoint took (a `check`, a resume's verification)
names objects nothing else reaches. Each snapshot's tree is therefore kept
reachable by a ref of the work tree, `refs/ckpt-index/<work tree>` (`pin_tree`),
so `git gc` never prunes what the private index names.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress

from git_agentckpt.errors import CorruptError, OperationFailed
from git_agentckpt.git import (
    direct_tree,
    incremental,
    large,
    object_batch,
    private_index,
    unchanged,
    watch_view,
)
from git_agentckpt.git.changed_since import changed_between
from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.ref_txn import RefMove
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import error_lines, run_git
from git_agentckpt.git.secret_files import catch_added, pin_secret_entries
from git_agentckpt.git.stream import run_git_streaming
from git_agentckpt.git.syserr import git_failure, translated

GITLINK = 0o160000
PINS = "refs/ckpt-index/"  # the tree each work tree's private index last wrote
SNAPSHOT_TRIES = 3
_EMPTY_NESTED = re.compile(r"error: '(.+?)' does not have a commit checked out")
SYMLINK = 0o120000


def agent_dir(repo: GitRepo) -> str:
    path = os.path.join(repo.git_dir, "agent")
    os.makedirs(path, exist_ok=True)
    return path


@contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive flock on `path` (released by the kernel if we are killed)."""
    with translated("cannot take a lock", path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _global_excludes(repo: GitRepo) -> str:
    configured = repo.config_get("core.excludesFile") or repo.config_get("core.excludesfile")
    if configured:
        path = os.path.expanduser(configured)
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        path = os.path.join(base, "git", "ignore")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            return fh.read()
    except OSError:
        return ""


def prepare_index(repo: GitRepo, secret_paths: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Bring the private index in step with the user's index and write the excludes;
    call under the flock. The environment and `-c` options of git on the private index."""
    env, config, _ = _prepare(repo, secret_paths, reseed=False)
    return env, config


def _prepare(
    repo: GitRepo, secret_paths: Sequence[str], *, reseed: bool
) -> tuple[dict[str, str], list[str], bool]:
    """`prepare_index`, re-seeding when the user's index changed (`private_index.py`)
    or when `reseed`; the last value says whether it did."""
    base = agent_dir(repo)
    index = os.path.join(base, "index")
    excludes = os.path.join(base, "exclude")
    # under our flock nobody else uses the private index: a lock left by a killed git is stale
    if os.path.exists(index + ".lock"):
        os.unlink(index + ".lock")
    global_rules = _global_excludes(repo)
    rules = private_index.rules_stamp(repo, global_rules)
    seeded = private_index.sync(repo, base, index, rules, force=reseed)
    known = large.load(base)
    if known:  # re-measured every time: a large file that shrank or went is dropped
        fresh = large.refresh(repo.workdir, known, repo.max_file_size or 1 << 62)
        if fresh != known:
            large.save(base, fresh)
        known = fresh
    _write_excludes(excludes, global_rules, secret_paths, known)
    env = {"GIT_INDEX_FILE": index}
    pin_secret_entries(repo, base, env, secret_paths, seeded)  # tracked secrets: HEAD's blob
    if not seeded:
        private_index.clear_present(repo, base, env, secret_paths)  # skipped files that came
    config = [
        "-c",
        f"core.excludesFile={excludes}",
        "-c",
        "advice.addEmbeddedRepo=false",
        *private_index.NO_SPLIT,
    ]
    return env, config, seeded


def _write_excludes(
    excludes: str, global_rules: str, secret_paths: Sequence[str], known: Mapping[str, object]
) -> None:
    text = (
        global_rules
        + "\n# git-ckpt secret_paths: never snapshotted\n"
        + "".join(p + "\n" for p in secret_paths)
        + "# git-ckpt: untracked files above [snapshot] max_file_size (.git/agent/large.json)\n"
        + large.exclude_patterns(known)
    )
    write_if_changed(excludes, text.encode("utf-8", "surrogateescape"))


# called once per path `git add` adds or removes, as it goes (a progress meter)
OnPath = Callable[[], None]


def snapshot_tree(repo: GitRepo, secret_paths: Sequence[str], on_path: OnPath | None = None) -> str:
    """Write the working tree (tracked + untracked-not-ignored, minus secrets) as a tree."""
    return snapshot_and_changes(repo, secret_paths, None, on_path)[0]


def snapshot_and_changes(
    repo: GitRepo,
    secret_paths: Sequence[str],
    base_tree: str | None,
    on_path: OnPath | None = None,
) -> tuple[str, frozenset[str]]:
    """The working tree as a tree, and the paths that differ from `base_tree`.

    The paths come from a diff of `base_tree` against the tree just written, which
    skips every subtree the two share: no walk of unchanged directories.
    """
    with translated("cannot snapshot the working tree", repo.git_dir):
        base = agent_dir(repo)
        return _snapshot_locked(repo, base, secret_paths, base_tree, on_path)


def _snapshot_locked(
    repo: GitRepo,
    base: str,
    secret_paths: Sequence[str],
    base_tree: str | None,
    on_path: OnPath | None,
) -> tuple[str, frozenset[str]]:
    with locked(os.path.join(base, "index.flock")):
        for tries in range(1, SNAPSHOT_TRIES + 1):
            try:
                tree, changed = _add_and_write(repo, secret_paths, base_tree, on_path)
                if pin_tree(repo, tree):
                    return tree, changed
            except OperationFailed:
                if tries == SNAPSHOT_TRIES:
                    raise
            # The private index is a cache: if git cannot use it (corrupt, or naming
            # blobs that were pruned before a pin kept them), or a concurrent prune
            # took the tree before it was pinned, rebuild it from the user's index.
            _drop_index(base)
        raise OperationFailed(
            "cannot snapshot the working tree: a concurrent `git gc --prune=now` kept "
            "removing its objects",
            hint="run the command again once git's maintenance has finished",
        )


def pin_ref(repo: GitRepo) -> str:
    """The ref that keeps this work tree's last snapshot tree reachable."""
    if repo.git_dir == repo.common_dir:
        return PINS + "main"
    name = os.fsencode(os.path.basename(repo.git_dir))
    return PINS + "worktree-" + hashlib.sha1(name, usedforsecurity=False).hexdigest()[:16]


def pin_tree(repo: GitRepo, tree: str) -> bool:
    """Point this work tree's pin at `tree` (under the index flock): from now on a prune
    keeps every object of it, whatever checkpoint takes it or not. False: the tree was
    pruned before the pin could name it. A tree still in a checkpoint's memory
    (`object_batch.py`) is left to that checkpoint's transaction (`pin_move`): its
    objects reach the disk in a kept pack, and the transaction moves the pin."""
    if object_batch.holds(tree):
        return True
    if not repo.exists(tree):  # a tree the private index's stamps named, since pruned
        return False
    try:
        repo.update_ref(pin_ref(repo), "git ckpt: the private index's tree", lambda _: tree)
    except CorruptError:
        if repo.exists(tree):
            raise
        return False
    return True


def pin_move(repo: GitRepo, tree: str) -> RefMove | None:
    """The move of this work tree's pin to `tree`, the snapshot a checkpoint records, in
    that checkpoint's transaction (None: the pin names it already)."""
    ref = pin_ref(repo)
    old = repo.read_ref(ref)
    return None if old == tree else RefMove(ref, tree, old)


def forget_private_index(repo: GitRepo) -> None:
    """Drop the private index (the next snapshot re-seeds it and hashes the files again):
    objects it named are gone (`CheckpointStore.create`)."""
    base = agent_dir(repo)
    with locked(os.path.join(base, "index.flock")):
        _drop_index(base)


def _drop_index(base: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(os.path.join(base, "index"))


def _add_and_write(
    repo: GitRepo, secret_paths: Sequence[str], base_tree: str | None, on_path: OnPath | None
) -> tuple[str, frozenset[str]]:
    """Under the flock: `add -A`, the changed paths, `write-tree`."""
    env, config, seeded = _prepare(repo, secret_paths, reseed=False)
    sparse = private_index.is_sparse(repo)
    base = agent_dir(repo)
    chosen = incremental.plan(repo, base, seeded, sparse)
    if chosen.view is not None:
        config = incremental.split_index(repo, config)
    direct = direct_tree.snapshot_tree(repo, base, config, chosen, secret_paths)
    if direct is not None:
        return _finish_direct(repo, base, chosen, direct, base_tree)
    direct_tree.catch_up(repo, base, env, config)
    update = _update_changed(repo, base, env, config, chosen, secret_paths)
    if update is None:
        if chosen.reason:
            watch_view.log_line(base, "full scan: " + chosen.reason)
        chosen = incremental.Plan(None, chosen.view, None, chosen.reason)
        added, removed = _added_removed(_add_all(repo, env, config, sparse, on_path).stdout)
    else:
        added, removed = update.added, update.removed
    if not seeded and any(os.path.basename(p) == ".gitignore" for p in (*added, *removed)):
        # Ignore rules changed: a file the private index took in while it was not
        # ignored would stay tracked there. Start again from the user's index.
        env, config, _ = _prepare(repo, secret_paths, reseed=True)
        if chosen.view is not None:
            config = incremental.split_index(repo, config)
        chosen = incremental.Plan(None, chosen.view, None, "a .gitignore changed")
        added, removed = _added_removed(_add_all(repo, env, config, sparse, on_path).stdout)
    private_index.remember_dropped(repo, base, removed)
    added += large.added_paths(private_index.bring_back_dropped(repo, base, env))
    secret = catch_added(repo, agent_dir(repo), env, secret_paths, added)
    if repo.max_file_size:
        _leave_out_large(repo, env, secret_paths, [p for p in added if p not in secret])
    private_index.keep_skipped(repo, agent_dir(repo), env, removed)
    tree = incremental.unchanged_tree(base, chosen)
    if tree is None:
        tree = run_git([*config, "write-tree"], cwd=repo.workdir, env=env).stdout.decode().strip()
    incremental.finish(base, chosen, tree)
    unchanged.remember(base, tree)
    return tree, changed_paths(repo, base_tree, tree)


def _finish_direct(
    repo: GitRepo,
    base: str,
    chosen: incremental.Plan,
    direct: direct_tree.DirectTree,
    base_tree: str | None,
) -> tuple[str, frozenset[str]]:
    """A tree written without git (`direct_tree.py`): stamp it with the paths where the
    private index is now behind it."""
    private_index.remember_dropped(repo, base, direct.removed)
    behind = set(chosen.stamp.behind if chosen.stamp is not None else ())
    behind.update(direct.added, direct.removed)
    incremental.finish(base, chosen, direct.tree, sorted(behind))
    if behind:
        unchanged.forget(base)
    return direct.tree, changed_paths(repo, base_tree, direct.tree)


def _update_changed(
    repo: GitRepo,
    base: str,
    env: Mapping[str, str],
    config: Sequence[str],
    chosen: incremental.Plan,
    secret_paths: Sequence[str],
) -> incremental.Update | None:
    """`add -A` of the paths the daemon's watcher saw change (`incremental.py`); None
    when the whole tree must be scanned."""
    if chosen.paths is None or chosen.stamp is None:
        return None
    return incremental.update_paths(
        repo, base, env, config, chosen.stamp.tree, chosen.paths, secret_paths
    )


def _add_all(
    repo: GitRepo,
    env: Mapping[str, str],
    config: Sequence[str],
    sparse: bool,
    on_path: OnPath | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`git add -A` on the private index; it names the paths it added and removed (secret
    and large files go back out). In a sparse checkout `--sparse`: paths outside the cone
    (`.agent/` among them) are added too, and skipped entries keep their blobs."""
    add = ["add", "-A", "--verbose", *(["--sparse"] if sparse else [])]
    proc = _run_add(repo, [*config, *add], env, on_path)
    empty = _EMPTY_NESTED.findall(proc.stderr.decode("utf-8", "replace"))
    if proc.returncode != 0 and empty:
        # a nested repository without a commit cannot be a gitlink: leave it out
        skip = [f":(exclude,literal){p.rstrip('/')}" for p in empty]
        proc = _run_add(repo, [*config, *add, "--", ".", *skip], env, on_path)
    if proc.returncode != 0:
        _raise_if_refused(repo, proc.stderr)
        errors = error_lines(proc.stderr)
        raise OperationFailed(
            "cannot snapshot the working tree: " + (errors[0] if errors else "git add failed"),
            hint="fix the path git names, or add it to .gitignore",
        )
    return proc


def _run_add(
    repo: GitRepo, args: Sequence[str], env: Mapping[str, str], on_path: OnPath | None
) -> subprocess.CompletedProcess[bytes]:
    """`git add …`; with `on_path`, its `--verbose` lines are read as git prints them."""
    if on_path is None:
        return run_git(args, cwd=repo.workdir, env=env, check=False)
    call = on_path

    def line(text: bytes) -> None:
        if text.startswith((b"add '", b"remove '")):
            call()

    return run_git_streaming(args, cwd=repo.workdir, env=env, on_stdout_line=line)


def _added_removed(add_verbose_stdout: bytes) -> tuple[list[str], list[str]]:
    """The paths `git add --verbose` added or updated, and those it removed."""
    removed = [
        os.fsdecode(line[8:-1])
        for line in add_verbose_stdout.split(b"\n")
        if line.startswith(b"remove '") and line.endswith(b"'")
    ]
    return large.added_paths(add_verbose_stdout), removed


def _raise_if_refused(repo: GitRepo, stderr: bytes) -> None:
    """A full disk or read-only git dir stops `git add`: that is a SystemRefused. A file
    of the working tree that git may not read stays an OperationFailed naming it."""
    refused = git_failure(stderr, repo.git_dir, "cannot snapshot the working tree")
    if refused is None:
        return
    about_git_dir = b"insufficient permission" in stderr or os.fsencode(repo.git_dir) in stderr
    if refused.errno in (errno.EACCES, errno.EPERM) and not about_git_dir:
        return
    raise refused


def _leave_out_large(
    repo: GitRepo, env: Mapping[str, str], secret_paths: Sequence[str], added: Sequence[str]
) -> None:
    """Take untracked files above the cap back out of the private index; remember them."""
    found = large.find_new(repo.workdir, added, repo.max_file_size, repo.head_tracks)
    if not found:
        return
    run_git(
        ["update-index", "--force-remove", "-z", "--stdin"],
        cwd=repo.workdir,
        env=env,
        input=b"".join(os.fsencode(p) + b"\0" for p in found),
    )
    base = agent_dir(repo)
    known = {**large.load(base), **found}
    large.save(base, known)
    _write_excludes(os.path.join(base, "exclude"), _global_excludes(repo), secret_paths, known)


def snapshot_unless_unchanged(
    repo: GitRepo, secret_paths: Sequence[str], base_tree: str | None
) -> tuple[str, frozenset[str], bool]:
    """`snapshot_and_changes`, except that when nothing changed since the last snapshot
    its tree is given back without one (`git/unchanged.py`; the last value: reused).
    In the daemon the watcher knows what changed: the snapshot itself costs that much,
    and no proof is needed."""
    if watch_view.active_for(repo.workdir) is not None:
        return (*snapshot_and_changes(repo, secret_paths, base_tree), False)
    with translated("cannot snapshot the working tree", repo.git_dir):
        base = agent_dir(repo)
        with locked(os.path.join(base, "index.flock")):
            env, config = prepare_index(repo, secret_paths)
            tree = unchanged.last_tree_if_unchanged(repo, base, env, config)
    if tree is None:
        return (*snapshot_and_changes(repo, secret_paths, base_tree), False)
    return tree, changed_paths(repo, base_tree, tree), True


def changed_paths(repo: GitRepo, base_tree: str | None, tree: str) -> frozenset[str]:
    """The files that differ between `base_tree` (None: nothing asked) and `tree`, from
    the last answer for that base when there is one (`changed_since.py`)."""
    if base_tree is None:
        return frozenset()
    return changed_between(repo, agent_dir(repo), base_tree, tree)


def large_files(repo: GitRepo) -> list[large.LargeFile]:
    """The large files the last snapshots left out (path, size, sha256), sorted by path."""
    return [f for _, f in sorted(large.load(agent_dir(repo)).items())]
