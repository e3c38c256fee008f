"""The files of a directory as git sees them, for `git ckpt verify --dir`.

`DirView(root)` answers two questions with real git:
- `files()`: the files git would count in the tree: tracked files present on disk
  and untracked files not ignored (`.gitignore` at every level, `info/exclude`,
  `core.excludesFile`), never `.git/`; a nested repository is one entry;
- `blob_ids(paths)`: the blob id git would store for each file (`hash-object
  --stdin-paths`: clean filters and end-of-line conversion applied), so a file
  whose bytes differ from the stored blob only by git's own conversion is unchanged.

When `root` is inside a git work tree, that repository is used (and `root` becomes
its top level, as for any git command). Any other directory (an unpacked copy, a
tarball) gets a throwaway repository in a temporary directory, pointed at `root`
with `--work-tree`: git reads the same ignore and attributes files there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from types import TracebackType

from git_agentckpt.git.run import clean_env, run_git


class DirView:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._tmp: str | None = None
        self._args: list[str] = []
        self._formats: dict[str, list[str]] = {}
        top = run_git(["rev-parse", "--show-toplevel"], cwd=self.root, check=False)
        inside = top.returncode == 0 and top.stdout.strip()
        self.in_repo = bool(inside)
        if inside:
            self.root = os.fsdecode(top.stdout.strip())

    def __enter__(self) -> DirView:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _git_args(self, object_format: str = "sha1") -> list[str]:
        """`--git-dir` / `--work-tree` of the throwaway repository (none in a repository)."""
        if self.in_repo:
            return []
        if object_format not in self._formats:
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix="git-ckpt-dir-")
            where = os.path.join(self._tmp, object_format)
            run_git(
                ["init", "-q", f"--object-format={object_format}", where],
                cwd=self._tmp,
                env=_no_repo_env(),
            )
            self._formats[object_format] = [
                f"--git-dir={os.path.join(where, '.git')}",
                f"--work-tree={self.root}",
            ]
        return self._formats[object_format]

    def files(self) -> set[str]:
        """Repository-relative POSIX paths of the files present (module doc)."""
        args = ["ls-files", "-z", "--others", "--exclude-standard"]
        if self.in_repo:
            args.insert(3, "--cached")
        out = run_git(
            [*self._git_args(), *args],
            cwd=self.root,
            env=None if self.in_repo else _no_repo_env(),
        ).stdout
        found: set[str] = set()
        for raw in out.split(b"\0"):
            if not raw:
                continue
            path = os.fsdecode(raw.rstrip(b"/"))
            if os.path.lexists(os.path.join(self.root, path)):
                found.add(path)
        return found

    def blob_ids(self, paths: Sequence[str], id_length: int = 40) -> dict[str, str]:
        """{path: the blob id git would store for that file}; ids of `id_length` hex digits
        (40: sha1, 64: sha256 repositories)."""
        if not paths:
            return {}
        object_format = "sha256" if id_length == 64 else "sha1"
        ordered = list(paths)
        out = run_git(
            [*self._git_args(object_format), "hash-object", "--stdin-paths"],
            cwd=self.root,
            env=None if self.in_repo else _no_repo_env(),
            input=b"".join(os.fsencode(p) + b"\n" for p in ordered),
            check=False,
        )
        ids = out.stdout.decode("ascii", "replace").split()
        if out.returncode != 0 or len(ids) != len(ordered):
            return {}  # a name git cannot take on a line: the byte comparison stands
        return dict(zip(ordered, ids, strict=True))


def _no_repo_env() -> dict[str, str]:
    """git run on the throwaway repository: no repository of the caller's environment."""
    env = clean_env()
    env.pop("GIT_OPTIONAL_LOCKS", None)
    return env
