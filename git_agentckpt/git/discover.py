"""Which repository a command works on: git's own answer, environment included.

git finds the repository of a command from the working directory upwards
(a `.git` directory, or a `.git` file naming the git dir: `--separate-git-dir`,
linked worktrees, submodules), unless the environment says otherwise:
`GIT_DIR` and `GIT_WORK_TREE` (also set by `git --git-dir … --work-tree …
ckpt`), `GIT_CEILING_DIRECTORIES`, `GIT_DISCOVERY_ACROSS_FILESYSTEM`. It
refuses a repository owned by another user unless `safe.directory` allows it.

When none of those variables is set, libgit2's own search (opening the start
directory, not the git dir it found, so that a `.git` file gives the work tree
it sits in) gives git's answer at no process cost. When one is set, or when
libgit2 refuses, git itself is asked (`git rev-parse --absolute-git-dir
--show-object-format --is-bare-repository --show-toplevel`, ~3 ms), and its
verdict decides: its message (with `safe.directory` advice), its git dir, its
work tree. Subprocess git calls of the tool are then pointed at the same git
dir and work tree (`run.target`).

SHA-256 repositories are refused here: pygit2 1.21 ships libgit2 1.9 built
for SHA-1 only (no 64-hex object ids), so nothing could be read or written.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pygit2
from pygit2.enums import Option, RepositoryOpenFlag

from git_agentckpt.errors import RepositoryError, shorten

# The variables git reads to find the repository; any of them set: git decides.
DISCOVERY_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)
_SAFE_DIRECTORY = "git config --global --add safe.directory "


@dataclass(frozen=True)
class Found:
    """git's answer: the git dir, the top of the work tree (None: bare) and the object format."""

    git_dir: str
    workdir: str | None
    object_format: str


def open_repository(start: str) -> pygit2.Repository:
    """The repository git would use for a command run in `start`."""
    if any(os.environ.get(name) for name in DISCOVERY_VARS):
        return _open(ask_git(start))
    try:
        return pygit2.Repository(start)  # searches upwards as git does, .git files included
    except pygit2.GitError:
        pass  # not a repository, another owner, an object format libgit2 cannot read...
    return _open(ask_git(start))


def ask_git(start: str) -> Found:
    """`git rev-parse` run in `start` with the caller's environment: git's own discovery."""
    args = ["--absolute-git-dir", "--show-object-format", "--is-bare-repository"]
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        proc = subprocess.run(
            ["git", "rev-parse", *args, "--show-toplevel"],
            cwd=start,
            env=env,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc
    except OSError as exc:
        raise RepositoryError(f"cannot open {shorten(start)}: {exc.strerror}") from exc
    lines = os.fsdecode(proc.stdout).splitlines()
    if len(lines) >= 3 and (proc.returncode == 0 or lines[2] == "true"):
        bare = lines[2] == "true"
        workdir = None if bare or len(lines) < 4 else lines[3]
        return Found(lines[0], workdir, lines[1])
    raise _refusal(start, os.fsdecode(proc.stderr))


def _refusal(start: str, stderr: str) -> RepositoryError:
    """git's refusal as a RepositoryError: its own sentence and its own advice."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    fatal = next((line[len("fatal: ") :] for line in lines if line.startswith("fatal: ")), None)
    advice = next((line for line in lines if line.startswith(_SAFE_DIRECTORY)), None)
    if advice is not None:
        return RepositoryError(
            f"{fatal or 'detected dubious ownership in the repository'} "
            "(it belongs to another user, and git refuses such a repository)",
            hint=f"if you trust it, run `{advice}` (git's own advice), then run this again",
        )
    if fatal is None or fatal.startswith("not a git repository"):
        return RepositoryError(
            f"not a git repository (or any parent up to /): {start}",
            hint="run `git init` first or cd into a repository",
        )
    return RepositoryError(f"git cannot use the repository here ({start}): {fatal}")


def _open(found: Found) -> pygit2.Repository:
    if found.object_format != "sha1":
        where = found.workdir or found.git_dir
        raise RepositoryError(
            f"cannot open the repository at {where}: unknown object format "
            f"'{found.object_format}' (the libgit2 {pygit2.LIBGIT2_VERSION} of pygit2 is "
            "built for SHA-1 object ids only): "
            "git ckpt supports SHA-1 repositories only",
            hint="checkpoint a SHA-1 repository (git init's default); see man git-ckpt, "
            "REPOSITORIES",
        )
    # git itself accepted the repository (`ask_git`), its owner included (safe.directory,
    # SUDO_UID): its verdict decides, so libgit2 is not asked to check the owner again
    try:
        repo = _open_accepted(found.git_dir)
    except pygit2.GitError as exc:
        raise RepositoryError(f"cannot open the repository at {found.git_dir}: {exc}") from exc
    if found.workdir is not None and (repo.workdir or "").rstrip("/") != found.workdir:
        repo.workdir = found.workdir  # GIT_WORK_TREE, or GIT_DIR with the cwd as its top
    return repo


def second_handle(repo: pygit2.Repository) -> pygit2.Repository:
    """Another handle on a repository this process opened (its owner already accepted):
    the object writes of a batch go through one (`object_batch.py`)."""
    return _open_accepted(repo.path)


def _open_accepted(git_dir: str) -> pygit2.Repository:
    """The repository at `git_dir`, whose owner git (or this process) already accepted."""
    with _owner_validation_off():
        return pygit2.Repository(git_dir, RepositoryOpenFlag.NO_SEARCH)


@contextmanager
def _owner_validation_off() -> Iterator[None]:
    before = bool(pygit2.option(Option.GET_OWNER_VALIDATION))
    pygit2.option(Option.SET_OWNER_VALIDATION, False)
    try:
        yield
    finally:
        pygit2.option(Option.SET_OWNER_VALIDATION, before)


def reset_environment_caches() -> None:
    """Make libgit2 read HOME, XDG_CONFIG_HOME and the like again.

    libgit2 computes the global, XDG and system config search paths and the
    home directory once, when pygit2 is imported. A process that changes its
    environment afterwards (the warm server's children take the caller's)
    calls this, so config is found where git itself would look.
    """
    for level in (
        pygit2.enums.ConfigLevel.GLOBAL,
        pygit2.enums.ConfigLevel.XDG,
        pygit2.enums.ConfigLevel.SYSTEM,
        pygit2.enums.ConfigLevel.PROGRAMDATA,
    ):
        pygit2.option(pygit2.enums.Option.SET_SEARCH_PATH, level, None)
    pygit2.option(pygit2.enums.Option.SET_HOMEDIR, None)
