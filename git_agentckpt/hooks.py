"""Bodies of the git hooks behind the `hooks/` shims, and their installation.

The reference-transaction hook runs `store.guard.check_updates` for writers
that are not this tool (libgit2 runs no hooks; the tool's own checkpoint ref
moves call the same function in-process). `GIT_CKPT_HOOK_BYPASS=1` lets an
administrator rewrite on purpose.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from git_agentckpt.errors import UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store.guard import check_updates, parse_updates

HOOK_NAMES = ("reference-transaction",)
MARKER = "git-ckpt reference-transaction shim"
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


# -- installation ---------------------------------------------------------------------


def shim_text() -> str:
    """The shim of `hooks/reference-transaction` with this Python as the fallback."""
    return SHIM.replace("@PYTHON@", sys.executable)


def hooks_dir(repo: GitRepo) -> Path:
    configured = repo.config_get("core.hooksPath") or repo.config_get("core.hookspath")
    if configured:
        raise UsageError(
            f"cowardly refusing to install hooks: core.hooksPath is set to {configured!r}",
            hint="run `git config --unset core.hooksPath` or add the shim from hooks/ "
            "to that directory yourself",
        )
    return Path(repo.common_dir) / "hooks"


def _is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def install(repo: GitRepo) -> list[str]:
    """Idempotent; an existing user hook is kept and chained. Returns what was done."""
    done: list[str] = []
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    for name in HOOK_NAMES:
        path = directory / name
        if path.exists() and not _is_ours(path):
            kept = directory / (name + USER_SUFFIX)
            if kept.exists():
                raise UsageError(
                    f"{path} exists and so does {kept}",
                    hint="move one of them away, then install again",
                )
            path.rename(kept)
            done.append(f"kept your {name} hook as {kept.name} (it still runs first)")
        tmp = directory / (name + ".ckpt-tmp")
        tmp.write_text(shim_text(), encoding="utf-8")
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(tmp, path)
        done.append(f"installed {path}")
    return done


def uninstall(repo: GitRepo) -> list[str]:
    done: list[str] = []
    directory = hooks_dir(repo)
    for name in HOOK_NAMES:
        path = directory / name
        kept = directory / (name + USER_SUFFIX)
        if path.exists() and _is_ours(path):
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
            if _is_ours(directory / name)
            else "other hook"
            if (directory / name).exists()
            else "missing"
        )
        for name in HOOK_NAMES
    }


SHIM = r"""#!/bin/sh
# git-ckpt reference-transaction shim (installed by `git ckpt hooks install`,
# removed by `git ckpt hooks uninstall`). It guards refs/agent/* and
# refs/notes/agent/*: a checkpoint ref may only move to a commit whose
# checkpoint.prepare event is logged, and audit refs only move forward.
# Other refs never start Python: the user's own git commands stay fast.
input=$(cat)
hookdir=$(dirname "$0")
if [ -x "$hookdir/reference-transaction.ckpt-user" ]; then
    printf '%s\n' "$input" | "$hookdir/reference-transaction.ckpt-user" "$@" || exit $?
fi
[ "$1" = prepared ] || exit 0
case "$input" in
    *" refs/agent/"* | *" refs/notes/agent/"*) ;;
    *) exit 0 ;;
esac
[ -n "$GIT_CKPT_HOOK_BYPASS" ] && exit 0
unset GIT_INDEX_FILE GIT_WORK_TREE
if command -v git-ckpt >/dev/null 2>&1; then
    printf '%s\n' "$input" | exec git-ckpt hook reference-transaction "$@"
fi
printf '%s\n' "$input" | exec "@PYTHON@" -m git_agentckpt hook reference-transaction "$@"
"""
