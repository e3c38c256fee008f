"""Bodies of the git hooks behind the `hooks/` shims, and their installation.

- `reference-transaction` (client) runs `store.guard.check_updates` for writers that
  are not this tool (libgit2 runs no hooks; the tool's own checkpoint ref moves call
  the same function in-process);
- `pre-push` (client) scans the objects about to leave for secrets and checks the
  trail it pushes (`audit/prepush.py`);
- `pre-receive` (server, `hooks install --server`) keeps the trail of a shared
  repository append-only (`audit/receive.py`). A server gets no reference-transaction
  shim: a refusal there makes `receive-pack` die in the middle of the push, and a client
  on git://, ssh or https reads only "the remote end hung up unexpectedly".

`GIT_CKPT_HOOK_BYPASS=1` lets an administrator rewrite on purpose.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from git_agentckpt.errors import CkptError, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.hook_shims import SHIMS, marker
from git_agentckpt.store.guard import check_updates, parse_updates

if TYPE_CHECKING:
    from git_agentckpt.audit.prepush import TrailVerifier
    from git_agentckpt.audit.receive import Verifier

CLIENT_HOOKS = ("reference-transaction", "pre-push")
SERVER_HOOKS = ("pre-receive",)
HOOK_NAMES = CLIENT_HOOKS + SERVER_HOOKS
SHIM = SHIMS["reference-transaction"]
MARKER = marker("reference-transaction")
USER_SUFFIX = ".ckpt-user"


def run_reference_transaction(state: str, stdin_text: str, cwd: str = ".") -> int:
    """The hook body: exit status 0 allows the transaction, 1 refuses it."""
    if state != "prepared" or os.environ.get("GIT_CKPT_HOOK_BYPASS"):
        return 0
    updates = [
        u
        for u in parse_updates(stdin_text.splitlines())
        if u.ref.startswith(("refs/agent/", "refs/notes/agent/"))
    ]
    if not updates:
        return 0
    repo = GitRepo.discover(cwd, allow_bare=True)  # GIT_DIR (relative to cwd) as git reads it
    repo.add_object_dirs_from_env()
    problems = check_updates(repo, updates)
    for p in problems:
        print(f"git-ckpt hook: refused: {p}", file=sys.stderr)
    if problems:
        print(
            "git-ckpt hook: write checkpoints with `git ckpt create`; set "
            "GIT_CKPT_HOOK_BYPASS=1 to rewrite on purpose",
            file=sys.stderr,
        )
    return 1 if problems else 0


def run_pre_receive(stdin_text: str, cwd: str = ".", verify: Verifier | None = None) -> int:
    """The server's hook: 0 accepts the push, 1 refuses it (every line on stderr, which
    receive-pack hands to the pushing client, `remote: `-prefixed). `verify`: what `git
    ckpt verify` rejects in the tasks the push touches (the facade passes it)."""
    from git_agentckpt.audit.receive import judge_push, judged_updates, refusal_lines

    if os.environ.get("GIT_CKPT_HOOK_BYPASS"):
        return 0
    updates = parse_updates(stdin_text.splitlines())
    if not judged_updates(updates):
        return 0
    try:
        repo = GitRepo.discover(cwd, allow_bare=True)  # GIT_DIR as receive-pack set it
        repo.add_object_dirs_from_env()  # the pushed objects, still in quarantine
        refusals = judge_push(repo, updates, verify)
    except CkptError as exc:
        _say([f"git ckpt: refused the push: cannot check it: {exc.one_line()}"])
        return 1
    if not refusals:
        return 0
    _say(refusal_lines(refusals, len(updates) - len(judged_updates(updates))))
    return 1


def run_pre_push(
    args: list[str], stdin_text: str, cwd: str = ".", verify: TrailVerifier | None = None
) -> int:
    """The client's hook: 0 lets the push go, 1 refuses it (reasons on stderr). `verify`:
    what `git ckpt verify` rejects in the tasks the push carries (the facade passes it)."""
    from git_agentckpt.audit.prepush import check_push

    if os.environ.get("GIT_CKPT_HOOK_BYPASS"):
        return 0
    remote = args[0] if args else "origin"
    try:
        repo = GitRepo.discover(cwd, allow_bare=True)
        verdict = check_push(repo, remote, parse_push_lines(stdin_text), verify)
    except CkptError as exc:
        _say(
            [
                f"git ckpt: pre-push could not scan the push: {exc.one_line()}",
                "git ckpt: fix it, or push without the scan: `git push --no-verify`",
            ]
        )
        return 1
    _say(verdict.lines())
    return 1 if verdict.refused else 0


def parse_push_lines(stdin_text: str) -> list[tuple[str, str, str, str]]:
    """pre-push input: `<local ref> <local sha> <remote ref> <remote sha>` per line."""
    out = []
    for line in stdin_text.splitlines():
        parts = line.split()
        if len(parts) == 4:
            out.append((parts[0], parts[1], parts[2], parts[3]))
    return out


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)
    sys.stderr.flush()


# -- installation ---------------------------------------------------------------------


def shim_text(name: str = "reference-transaction") -> str:
    """The shim of `hooks/<name>` with this Python as the fallback."""
    return SHIMS[name].replace("@PYTHON@", sys.executable)


def hooks_dir(repo: GitRepo) -> Path:
    configured = repo.config_get("core.hooksPath") or repo.config_get("core.hookspath")
    if configured:
        raise UsageError(
            f"cowardly refusing to install hooks: core.hooksPath is set to {configured!r}",
            hint="run `git config --unset core.hooksPath` or add the shims from hooks/ "
            "to that directory yourself",
        )
    return Path(repo.common_dir) / "hooks"


def _is_ours(path: Path, name: str) -> bool:
    try:
        return marker(name) in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def install(repo: GitRepo, server: bool = False) -> list[str]:
    """Idempotent; an existing user hook is kept and chained. Returns what was done.
    `server`: the pre-receive shim, and no reference-transaction shim (see the module)."""
    done: list[str] = []
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    for name in SERVER_HOOKS if server else CLIENT_HOOKS:
        done.extend(_install_one(directory, name))
    if server and _is_ours(directory / "reference-transaction", "reference-transaction"):
        done.extend(_uninstall_one(directory, "reference-transaction"))
        done.append(
            "a server checks pushes in pre-receive: a refusal in reference-transaction "
            'would reach the pushing client as "the remote end hung up unexpectedly"'
        )
    return done


def _install_one(directory: Path, name: str) -> list[str]:
    done = []
    path = directory / name
    if path.exists() and not _is_ours(path, name):
        kept = directory / (name + USER_SUFFIX)
        if kept.exists():
            raise UsageError(
                f"{path} exists and so does {kept}",
                hint="move one of them away, then install again",
            )
        path.rename(kept)
        done.append(f"kept your {name} hook as {kept.name} (it still runs first)")
    tmp = directory / (name + ".ckpt-tmp")
    tmp.write_text(shim_text(name), encoding="utf-8")
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, path)
    done.append(f"installed {path}")
    return done


def uninstall(repo: GitRepo, server: bool = False) -> list[str]:
    done: list[str] = []
    directory = hooks_dir(repo)
    for name in SERVER_HOOKS if server else CLIENT_HOOKS:
        done.extend(_uninstall_one(directory, name))
    return done


def _uninstall_one(directory: Path, name: str) -> list[str]:
    done = []
    path = directory / name
    kept = directory / (name + USER_SUFFIX)
    if path.exists() and _is_ours(path, name):
        path.unlink()
        done.append(f"removed {path}")
    if kept.exists() and not path.exists():
        kept.rename(path)
        done.append(f"restored your {name} hook")
    return done


def status(repo: GitRepo) -> dict[str, str]:
    directory = hooks_dir(repo)
    return {
        name: (
            "installed"
            if _is_ours(directory / name, name)
            else "other hook"
            if (directory / name).exists()
            else "missing"
        )
        for name in HOOK_NAMES
    }
