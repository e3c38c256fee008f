"""A small object model over pygit2: refs (compare-and-swap), objects, commits, trees.

This module and its siblings in `git_agentckpt/git/` are the only ones that
import pygit2. They hand back plain strings (hex object ids) and small frozen
dataclasses (named tuples where a long walk makes one per commit), and translate
`pygit2.GitError` / `OSError` into `CkptError`s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, cast

import pygit2
from pygit2.enums import FileMode, ObjectType

from git_agentckpt.errors import (
    CorruptError,
    NotFound,
    RepositoryError,
    shorten,
)
from git_agentckpt.git import object_batch
from git_agentckpt.git.discover import open_repository
from git_agentckpt.git.large import DEFAULT_MAX_FILE_SIZE
from git_agentckpt.git.ref_moves import RefMoves
from git_agentckpt.git.run import keep_object_dirs, stream_records, target, untarget
from git_agentckpt.git.signing import Identity, commit_signed, signing_of
from git_agentckpt.git.syserr import stored

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# libgit2 keeps no tree above 4 KiB in its object cache: a directory of 2,500 entries
# (~100 KB) was inflated and parsed again at every lookup of one of its names (0.57 ms
# each, ~6 a directory in a snapshot). Trees up to 1 MiB are kept (the cache's own total
# bound, 256 MiB, still holds).
TREE_CACHE_LIMIT = 1 << 20
pygit2.settings.cache_object_limit(ObjectType.TREE, TREE_CACHE_LIMIT)

_TREE_MODE = 0o040000
T = TypeVar("T")


def _kind(mode: int) -> int:
    """A file's type as git's diff tells a type change: regular, link or gitlink."""
    return mode & 0o170000


class CommitInfo(NamedTuple):  # a tuple: made for each commit of a long log, made fast
    id: str
    tree: str
    parents: tuple[str, ...]
    message: str
    time: int  # committer time, unix seconds


@dataclass(frozen=True)
class Change:
    status: str  # A, D, M, T
    path: str
    old_id: str | None
    new_id: str | None
    old_mode: int
    new_mode: int


@dataclass(frozen=True)
class TreeFile:
    path: str
    id: str
    mode: int


class GitRepo(RefMoves):
    """An opened, non-bare repository."""

    def __init__(self, repo: pygit2.Repository, *, allow_bare: bool = False) -> None:
        self._repo = repo
        self._empty_tree_written = False
        self._batch: object_batch.Batch | None = None  # writes go to memory (`batched_objects`)
        self._batch_reader: object_batch.MemoryObjects | None = None
        workdir = repo.workdir
        self.is_bare = bool(repo.is_bare or not workdir)
        if self.is_bare and allow_bare:
            workdir = repo.path
        elif self.is_bare:
            raise RepositoryError(
                f"{repo.path.rstrip('/')} is a bare repository: "
                "there is no working tree to checkpoint",
                hint="run git ckpt inside a clone with a working tree (list, log, show, "
                "diff, report, task show|list and verify read a bare repository)",
            )
        assert workdir is not None
        # Snapshots leave out untracked files above this size (`git/large.py`); the
        # facade sets it from `[snapshot] max_file_size` (0: no cap).
        self.max_file_size = DEFAULT_MAX_FILE_SIZE
        self.workdir = workdir.rstrip("/")
        self.git_dir = repo.path.rstrip("/")
        common = os.path.join(self.git_dir, "commondir")
        if os.path.exists(common):
            with open(common, encoding="utf-8") as fh:
                self.common_dir = os.path.normpath(os.path.join(self.git_dir, fh.read().strip()))
        else:
            self.common_dir = self.git_dir
        if not self.is_bare:  # git run by the tool works on this git dir and work tree too
            target(self.workdir, self.git_dir)
        else:  # and no object directories an earlier opening added (a hook's quarantine)
            untarget(self.workdir)

    @classmethod
    def discover(cls, path: str, *, allow_bare: bool = False) -> GitRepo:
        """The repository git would use for a command run in `path` (`git/discover.py`)."""
        start = os.path.abspath(path)
        try:
            os.stat(start)
        except FileNotFoundError as exc:
            raise RepositoryError(
                f"{shorten(start)} does not exist", hint="pass the path of a git repository"
            ) from exc
        except OSError as exc:
            raise RepositoryError(f"cannot open {shorten(start)}: {exc.strerror}") from exc
        return cls(open_repository(start), allow_bare=allow_bare)

    def add_object_dirs_from_env(self) -> None:
        """In a hook during `git push`, new objects wait in a quarantine directory that git
        names in GIT_OBJECT_DIRECTORY / GIT_ALTERNATE_OBJECT_DIRECTORIES: read them too."""
        dirs = [os.environ.get("GIT_OBJECT_DIRECTORY", "")]
        dirs += os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES", "").split(os.pathsep)
        found = [os.path.abspath(d) for d in dirs if d and os.path.isdir(d)]
        for d in found:
            self._repo.odb.add_disk_alternate(d)
        keep_object_dirs(self.workdir, found)  # and git run here (run_git strips the vars)

    # -- refs ---------------------------------------------------------------

    def head(self) -> str | None:
        """The commit HEAD points at, or None on an unborn branch."""
        try:
            if self._repo.head_is_unborn:
                return None
            return str(self._repo.head.target)
        except pygit2.GitError:
            return None

    def head_tracks(self, path: str) -> bool:
        """Whether the tree of HEAD has a file at `path` (False on an unborn branch)."""
        try:
            if self._repo.head_is_unborn:
                return False
            tree = self._repo.head.peel(pygit2.Commit).tree
            return path in tree
        except (pygit2.GitError, KeyError, ValueError):
            return False

    # -- objects ------------------------------------------------------------

    def _stored(self, write: Callable[[], T]) -> T:
        """An object write: a full disk, read-only store or permission is a SystemRefused;
        a race with `git repack` is written again (`syserr.stored`)."""
        return stored(write, os.path.join(self.common_dir, "objects"))

    @contextlib.contextmanager
    def batched_objects(self) -> Iterator[None]:
        """Objects written inside go to disk as one pack, before anything outside this
        process can name them (`git/object_batch.py`). Nested: the outer batch holds."""
        if self._batch is not None or not self.config_bool(object_batch.PACK_OBJECTS, True):
            yield  # nested, or packing turned off: loose, one file per object
            return
        if self._batch_reader is None:
            self._batch_reader = object_batch.reader_for(self._repo)
        objects = os.path.join(self.common_dir, "objects")
        durable = self.config_bool("core.fsyncObjectFiles", False)
        self._batch = object_batch.open_batch(
            self._repo, objects, self._batch_reader, durable=durable
        )
        try:
            yield
        finally:
            batch, self._batch = self._batch, None
            object_batch.close_batch(batch)

    def _writer(self) -> pygit2.Repository:
        """The handle object writes go through: the batch's, when one is open."""
        batch = self._batch
        if batch is None:
            return self._repo
        if object_batch.over_budget(batch):
            object_batch.flush(batch)
        return batch.writer

    def empty_tree(self) -> str:
        """The empty tree, written to the object store (git fsck wants it stored)."""
        if not self._empty_tree_written:
            self._stored(lambda: self._writer().TreeBuilder().write())
            self._empty_tree_written = True
        return EMPTY_TREE

    def write_blob(self, data: bytes) -> str:
        """Store `data` as is: callers pass redacted data (`store/redaction.py`)."""
        return str(self._stored(lambda: self._writer().create_blob(data)))

    def write_blob_from_file(self, path: str) -> str:
        """Store the bytes of the file at `path` as they are (no filter applies). Read here
        below 64 MiB: libgit2's own file read costs ~4.4 ms the first time in a process
        (it sets its filters up), which a daemon child pays at every call."""

        def write() -> pygit2.Oid:
            if os.path.getsize(path) >= 64 << 20:
                return self._repo.create_blob_fromdisk(path)
            with open(path, "rb") as fh:
                return self._writer().create_blob(fh.read())

        return str(self._stored(write))

    def read_blob(self, oid: str) -> bytes:
        obj = self._lookup(oid)
        if not isinstance(obj, pygit2.Blob):
            raise CorruptError(f"object {oid} is not a blob")
        return obj.data

    def read_tree_raw(self, oid: str) -> bytes:
        """The stored body of a tree object, entries exactly as written (see `tree_check`)."""
        return self._read_raw(oid, ObjectType.TREE, "tree")

    def _read_raw(self, oid: str, kind: ObjectType, what: str) -> bytes:
        """An object's body as stored, through the object database (no parsing)."""
        try:
            got, data = self._repo.odb.read(oid)
        except (KeyError, ValueError) as exc:
            raise NotFound(f"object {oid} is not in the repository") from exc
        except pygit2.GitError as exc:
            raise _damaged(oid, exc) from exc
        if got != kind:
            raise CorruptError(f"object {oid} is not a {what}")
        return bytes(data)

    def exists(self, oid: str) -> bool:
        try:
            return oid in self._repo
        except (ValueError, pygit2.GitError):
            return False

    def _lookup(self, oid: str, handle: pygit2.Repository | None = None) -> pygit2.Object:
        try:
            return (handle or self._repo)[oid]
        except (KeyError, ValueError) as exc:
            raise NotFound(f"object {oid} is not in the repository") from exc
        except pygit2.GitError as exc:  # stored but unreadable: a hash mismatch, a bad pack
            raise _damaged(oid, exc) from exc

    def resolve_prefix(self, prefix: str) -> str | None:
        try:
            obj = self._repo.revparse_single(prefix)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if isinstance(obj, pygit2.Tag):
            return str(obj.peel(pygit2.Commit).id)
        return str(obj.id) if isinstance(obj, pygit2.Commit) else None

    def write_tree(self, entries: Mapping[str, tuple[str, int]], base: str | None = None) -> str:
        """A tree from `base` (or empty) with `entries` {name: (oid, mode)} set; oid '' removes."""
        writer = self._writer()
        if base is not None:
            tree = self._lookup(base, writer)  # a builder takes a tree of its own handle
            if not isinstance(tree, pygit2.Tree):
                raise CorruptError(f"object {base} is not a tree")
            builder = writer.TreeBuilder(tree)
        else:
            builder = writer.TreeBuilder()
        for name, (oid, mode) in entries.items():
            if not oid:
                if builder.get(name) is not None:
                    builder.remove(name)
            else:
                builder.insert(name, pygit2.Oid(hex=oid), mode)
        return str(self._stored(builder.write))

    def tree_entries(self, tree_id: str) -> dict[str, tuple[str, int]]:
        """The direct entries of one tree: {name: (oid, mode)}."""
        tree = self._lookup(tree_id)
        if not isinstance(tree, pygit2.Tree):
            raise CorruptError(f"object {tree_id} is not a tree")
        return {str(e.name): (str(e.id), int(e.filemode)) for e in tree}

    def tree_size(self, tree_id: str) -> int:
        """How many direct entries one tree has."""
        tree = self._lookup(tree_id)
        if not isinstance(tree, pygit2.Tree):
            raise CorruptError(f"object {tree_id} is not a tree")
        return len(tree)

    def tree_entry(self, tree_id: str, path: str) -> tuple[str, int] | None:
        """The entry at POSIX `path` in a tree, (oid, mode), without reading the others."""
        tree = self._lookup(tree_id)
        if not isinstance(tree, pygit2.Tree):
            raise CorruptError(f"object {tree_id} is not a tree")
        try:
            entry = tree[path]
        except (KeyError, ValueError):
            return None
        return str(entry.id), int(entry.filemode)

    def tree_files(self, tree_id: str) -> Iterator[TreeFile]:
        """Every file (blob, link, gitlink) of a tree, recursively, as POSIX paths."""
        tree = self._lookup(tree_id)
        if not isinstance(tree, pygit2.Tree):
            raise CorruptError(f"object {tree_id} is not a tree")
        stack: list[tuple[str, pygit2.Tree]] = [("", tree)]
        while stack:
            prefix, current = stack.pop()
            for entry in current:
                path = prefix + str(entry.name)
                if entry.filemode == FileMode.TREE:
                    sub = self._lookup(str(entry.id))
                    if not isinstance(sub, pygit2.Tree):
                        raise CorruptError(f"object {entry.id} is not a tree")
                    stack.append((path + "/", sub))
                else:
                    yield TreeFile(path, str(entry.id), int(entry.filemode))

    def commit(
        self,
        tree: str,
        parents: list[str],
        message: str,
        *,
        sign: bool = False,
    ) -> str:
        """Store a commit as is: callers pass a redacted message (`store/redaction.py`).

        With `sign`, and git signing configured (`git/signing.py`), real git writes
        it signed (`git commit-tree -S`); otherwise pygit2 writes it, unsigned.
        """
        sig = self.signature()
        signing = signing_of(self) if sign else None
        if signing is not None:
            who = Identity(sig.name, sig.email, int(sig.time), int(sig.offset))
            return commit_signed(self, signing, tree, parents, message, who)
        # Not `create_commit`: when the object write fails (seen on a full disk) libgit2's
        # git_commit_create still returns success and the id of an object it never
        # stored; the ref move then failed with "target OID ... doesn't exist". The
        # same bytes written through the object database report the failure.
        raw = cast(  # pygit2's stub says Oid: it returns the commit object's text
            str,
            self._repo.create_commit_string(
                sig, sig, message, pygit2.Oid(hex=tree), [pygit2.Oid(hex=p) for p in parents]
            ),
        )
        return str(self._stored(lambda: self._writer().odb.write(ObjectType.COMMIT, raw)))

    def commit_text(self, oid: str) -> tuple[str, str]:
        """A commit's header (tree, parents, author, committer, …) and message, as stored,
        in one read: what the next event commit's Log-Digest and Parent-Head bind."""
        head, _, message = self._read_raw(oid, ObjectType.COMMIT, "commit").partition(b"\n\n")
        return head.decode("utf-8", "surrogateescape"), message.decode("utf-8", "replace")

    def is_signed(self, oid: str) -> bool:
        """Whether the commit object carries a signature header (`gpgsig`), as stored."""
        try:
            head = self._read_raw(oid, ObjectType.COMMIT, "commit").partition(b"\n\n")[0]
        except (NotFound, CorruptError):
            return False
        return b"\ngpgsig" in head or head.startswith(b"gpgsig")

    def signature(self) -> pygit2.Signature:
        try:
            sig = self._repo.default_signature
        except (KeyError, pygit2.GitError):
            name = os.environ.get("GIT_COMMITTER_NAME", "git-ckpt")
            email = os.environ.get("GIT_COMMITTER_EMAIL", "git-ckpt@localhost")
            sig = pygit2.Signature(name, email)
        return sig

    def read_commit(self, oid: str) -> CommitInfo:
        obj = self._lookup(oid)
        if not isinstance(obj, pygit2.Commit):
            raise NotFound(f"{oid} is not a commit")
        return CommitInfo(
            id=str(obj.id),
            tree=str(obj.tree_id),
            parents=tuple(str(p) for p in obj.parent_ids),
            message=obj.message,
            time=int(obj.commit_time),
        )

    def walk(self, tip: str) -> Iterator[CommitInfo]:
        """Commits from `tip` backwards along the first-parent chain."""
        current: str | None = tip
        while current is not None:
            info = self.read_commit(current)
            yield info
            current = info.parents[0] if info.parents else None

    def walk_oldest_first(self, tip: str) -> Iterator[CommitInfo]:
        """The first-parent chain from its root to `tip`, oldest first, read as `git log
        --reverse` writes it (one commit at a time here; git itself holds every message
        until it can write the first). `time` is not read (0)."""
        return self._first_parent_log(tip, ["--reverse"])

    def walk_streamed(self, tip: str) -> Iterator[CommitInfo]:
        """The first-parent chain from `tip` back to its root, newest first, as `git log`
        streams it: git holds no message and keeps working while the caller reads (the
        whole chain: `walk` reads commit by commit, for a few). `time` is not read (0)."""
        return self._first_parent_log(tip, [])

    def _first_parent_log(self, tip: str, order: list[str]) -> Iterator[CommitInfo]:
        args = ["log", "-z", "--first-parent", *order, "--format=%H %T %P%n%B", tip, "--"]
        for record in stream_records(args, cwd=self.workdir):
            head, _, message = record.partition(b"\n")
            ids = head.decode("ascii").split()
            yield CommitInfo(ids[0], ids[1], tuple(ids[2:]), message.decode("utf-8", "replace"), 0)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        try:
            if ancestor in self.read_commit(descendant).parents:
                return True  # the usual case (a ref moving by one commit): no graph walk
        except (NotFound, CorruptError):
            return False
        try:
            return bool(
                self._repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor))
            )
        except pygit2.GitError:
            return False

    def diff_trees(
        self, old_tree: str, new_tree: str, *, type_changes: bool = False
    ) -> list[Change]:
        """The files that differ between two trees, in path order.

        A path whose type changed (file <-> symlink, file <-> gitlink) is a delete
        and an add, as restore writes it, unless `type_changes`: then one `T`
        change, as `git diff` shows it. A subtree with the same id on both sides is
        never read: the cost follows the directories on a changed path (libgit2's
        own tree diff reads every entry of both trees, ~4 ms at 50k files even for
        two trees that differ in one file).
        """
        out: list[Change] = []
        self._diff_into(old_tree, new_tree, "", type_changes, out)
        out.sort(key=lambda c: c.path)
        return out

    def first_missing(self, commit: str) -> str | None:
        """The first object `commit` needs that is not stored: itself, or something its
        tree holds that its first parent's tree does not share (None: all are there).
        What the parent names was stored before; a concurrent `git gc --prune=now` may
        have taken what is new. Costs the directories on the changed paths."""
        if not self.exists(commit):
            return commit
        try:
            info = self.read_commit(commit)
        except NotFound:  # a tree or blob (a pin): stored, and checked with its commit
            return None
        base = self.read_commit(info.parents[0]).tree if info.parents else None
        return self._missing_under(info.tree, base)

    def _missing_under(self, tree: str, base: str | None) -> str | None:
        if tree == base:
            return None
        if not self.exists(tree):
            return tree
        before = self._entries(base)
        for name, entry in self._entries(tree).items():
            old = before.get(name)
            if (old is not None and old.id == entry.id) or entry.filemode == FileMode.COMMIT:
                continue  # shared, or a submodule's commit (never stored here)
            if entry.filemode == FileMode.TREE:
                sub = str(old.id) if old is not None and old.filemode == FileMode.TREE else None
                found = self._missing_under(str(entry.id), sub)
            else:
                found = None if self.exists(str(entry.id)) else str(entry.id)
            if found is not None:
                return found
        return None

    def _entries(self, tree_id: str | None) -> dict[str, pygit2.Object]:
        """A tree's entries by name, as libgit2's objects (their modes and ids are read
        only where two sides differ: turning each into Python values costs ~7x more)."""
        if tree_id is None:
            return {}
        tree = self._lookup(tree_id)
        if not isinstance(tree, pygit2.Tree):
            raise CorruptError(f"object {tree_id} is not a tree")
        return {str(e.name): e for e in tree}

    def _diff_into(
        self, old: str | None, new: str | None, prefix: str, typed: bool, out: list[Change]
    ) -> None:
        if old == new:
            return
        before, after = self._entries(old), self._entries(new)
        for name in before.keys() | after.keys():
            a, b = before.get(name), after.get(name)
            if a is not None and b is not None and a.id == b.id and a.filemode == b.filemode:
                continue
            was = None if a is None else (str(a.id), int(a.filemode))
            now = None if b is None else (str(b.id), int(b.filemode))
            self._diff_entry(prefix + str(name), was, now, typed, out)

    def _diff_entry(
        self,
        path: str,
        was: tuple[str, int] | None,
        now: tuple[str, int] | None,
        typed: bool,
        out: list[Change],
    ) -> None:
        old_sub = was[0] if was is not None and was[1] == _TREE_MODE else None
        new_sub = now[0] if now is not None and now[1] == _TREE_MODE else None
        if old_sub is not None or new_sub is not None:
            self._diff_into(old_sub, new_sub, path + "/", typed, out)
        was_file = was if old_sub is None else None
        now_file = now if new_sub is None else None
        if was_file is None and now_file is not None:
            out.append(Change("A", path, None, now_file[0], 0, now_file[1]))
        elif was_file is not None and now_file is None:
            out.append(Change("D", path, was_file[0], None, was_file[1], 0))
        elif was_file is None or now_file is None:
            return  # two directories, or nothing at all
        elif _kind(was_file[1]) == _kind(now_file[1]):
            out.append(Change("M", path, was_file[0], now_file[0], was_file[1], now_file[1]))
        elif typed:
            out.append(Change("T", path, was_file[0], now_file[0], was_file[1], now_file[1]))
        else:
            out.append(Change("D", path, was_file[0], None, was_file[1], 0))
            out.append(Change("A", path, None, now_file[0], 0, now_file[1]))

    def config_values(self, keys: Sequence[str]) -> list[str | None]:
        """Several config values read from one config object (None: not set)."""
        try:
            config = self._repo.config
        except pygit2.GitError:
            return [None] * len(keys)
        out: list[str | None] = []
        for key in keys:
            try:
                out.append(str(config[key]))
            except (KeyError, pygit2.GitError):
                out.append(None)
        return out

    def config_bool(self, key: str, default: bool) -> bool:
        """A boolean setting as git spells one (`as_bool`)."""
        return as_bool(self.config_get(key), default)

    def config_get(self, key: str) -> str | None:
        try:
            value = self._repo.config[key]
        except (KeyError, pygit2.GitError):
            return None
        return str(value)


def as_bool(value: str | None, default: bool) -> bool:
    """A config value as a boolean: true/yes/on/1 or false/no/off/0 (any case, spaces
    around allowed); unset, empty or anything else gives `default`."""
    word = (value or "").strip().lower()
    if word in ("true", "yes", "on", "1"):
        return True
    return False if word in ("false", "no", "off", "0") else default


def _damaged(oid: str, exc: Exception) -> CorruptError:
    """A stored object libgit2 cannot read (a hash mismatch, a bad pack), named."""
    why = (str(exc).splitlines() or ["unreadable"])[0].removeprefix(f"{oid}: ")
    return CorruptError(
        f"object {oid} is damaged ({why})",
        hint="`git ckpt verify` names what it belongs to; `git fsck` checks the store",
    )
