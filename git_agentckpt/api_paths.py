"""The facade's calls that take a path, not a Checkpointer: they work outside a work
tree (a bare repository, git's hooks, an agent's user settings, an exported folder).
`git_agentckpt.api` re-exports each of them; the CLI calls them there.

The use-case modules are imported when first called, as in `api`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from git_agentckpt.errors import UsageError

if TYPE_CHECKING:
    from git_agentckpt.audit.manifest_check import DirCheck
    from git_agentckpt.audit.problems import VerifyReport
    from git_agentckpt.git.repo import GitRepo
    from git_agentckpt.integrations.install import IntegrateResult
    from git_agentckpt.store.doctor import DoctorReport
    from git_agentckpt.store.guard import Update


def doctor(path: str = ".", dry_run: bool = False) -> DoctorReport:
    """Stale locks and temporary files of killed writers, removed when provably orphaned."""
    from git_agentckpt.git.repo import GitRepo
    from git_agentckpt.store.doctor import doctor as run_doctor

    return run_doctor(GitRepo.discover(path, allow_bare=True), dry_run=dry_run)


def verify(
    path: str = ".",
    tasks: Sequence[str] = (),
    against: str | None = None,
    witness: str | None = None,
) -> VerifyReport:
    """Check the trail of `tasks` (all when empty) end to end, in any repository (bare too):
    the problems found, each named (`audit/problems.py` KINDS). `against`: a remote whose
    refs the local ones must contain; `witness`: the witness file (default: the one `push`
    writes, used when it exists)."""
    from git_agentckpt.audit.verify import verify_trail
    from git_agentckpt.git.repo import GitRepo

    repo = GitRepo.discover(path, allow_bare=True)
    return verify_trail(repo, tasks, against=against, witness_file=witness)


def verify_pushed(path: str, updates: Sequence[tuple[str, str, str]]) -> VerifyReport:
    """For a pre-receive hook: verify the tasks whose refs a push updates, as the push would
    leave them. `updates`: (old, new, ref) as git gives them (a zero id: created/deleted).
    Objects in git's quarantine are read (GIT_OBJECT_DIRECTORY and alternates). Moves
    backwards and deletions are the hook's to refuse (`store/guard.py`); the witness file
    is not read (it is the pusher's, not the server's)."""
    from git_agentckpt.audit.verify import verify_tips
    from git_agentckpt.git.repo import GitRepo

    repo = GitRepo.discover(path, allow_bare=True)
    repo.add_object_dirs_from_env()
    tips = {ref: (None if new.strip("0") == "" else new) for _old, new, ref in updates}
    return verify_tips(repo, tips)


def install_hooks(path: str = ".", server: bool = False) -> list[str]:
    """Install the client shims (reference-transaction, pre-push), or with `server` the
    pre-receive shim of a shared repository; a hook the user had is kept and chained."""
    from git_agentckpt import hooks
    from git_agentckpt.git.repo import GitRepo

    return hooks.install(GitRepo.discover(path, allow_bare=True), server=server)


def uninstall_hooks(path: str = ".", server: bool = False) -> list[str]:
    """Remove the shims (the client's, or with `server` pre-receive) and put back a hook
    they had chained."""
    from git_agentckpt import hooks
    from git_agentckpt.git.repo import GitRepo

    return hooks.uninstall(GitRepo.discover(path, allow_bare=True), server=server)


def hooks_status(path: str = ".") -> dict[str, str]:
    """Whether each hook is installed."""
    from git_agentckpt import hooks
    from git_agentckpt.git.repo import GitRepo

    return hooks.status(GitRepo.discover(path, allow_bare=True))


def run_hook(name: str, args: Sequence[str], stdin_text: str, cwd: str) -> int:
    """The body of a git hook shim (`hooks/`); its exit status."""
    from git_agentckpt import hooks

    if name == "reference-transaction":
        return hooks.run_reference_transaction(args[0] if args else "", stdin_text, cwd)
    if name == "pre-receive":
        return hooks.run_pre_receive(stdin_text, cwd, verify=_verify_push_for_hook)
    if name == "pre-push":
        return hooks.run_pre_push(list(args), stdin_text, cwd, verify=_verify_tasks_for_hook)
    raise UsageError(f"unknown hook {name!r}")


def _verify_push_for_hook(repo: GitRepo, updates: list[Update]) -> list[tuple[str | None, str]]:
    """pre-receive: the errors `verify` finds in the tasks a push touches, as it leaves them."""
    report = verify_pushed(repo.git_dir, [(u.old, u.new, u.ref) for u in updates])
    return [(p.task, p.one_line()) for p in report.errors]


def _verify_tasks_for_hook(repo: GitRepo, tasks: list[str]) -> list[str]:
    """pre-push: the errors `verify` finds in the tasks a push carries."""
    from git_agentckpt.audit.verify import verify_trail

    return [p.one_line() for p in verify_trail(repo, tasks).errors]


def integrate(
    agent: str, scope: str = "project", path: str = ".", *, remove: bool = False
) -> IntegrateResult:
    """Put the hooks of `git ckpt` into an agent's settings (and its block into CLAUDE.md
    or AGENTS.md), or take them out again byte for byte (`integrations/install.py`).
    `--user` works outside a repository too."""
    from git_agentckpt.errors import RepositoryError
    from git_agentckpt.git.repo import GitRepo
    from git_agentckpt.integrations.install import Places
    from git_agentckpt.integrations.install import integrate as run

    worktree = agent_dir = None
    try:
        repo = GitRepo.discover(path)
        worktree, agent_dir = repo.workdir, os.path.join(repo.git_dir, "agent")
    except RepositoryError:
        if scope != "user":
            raise
    home = os.path.expanduser("~")
    codex_home = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    config = xdg if xdg and os.path.isabs(xdg) else os.path.join(home, ".config")
    places = Places(worktree, agent_dir, home, os.path.abspath(codex_home), config + "/git-ckpt")
    return run(agent, scope, places, remove=remove)


def verify_dir(path: str, export_dir: str, checkpoint: str | None = None) -> DirCheck:
    """The working tree at `path` (its repository's top level, or the directory itself
    when it is in no repository) against a manifest of `git ckpt export` in `export_dir`:
    each missing, extra, modified file, and each changed type or mode."""
    from git_agentckpt.audit.manifest_check import check_dir

    return check_dir(path, export_dir, checkpoint)
