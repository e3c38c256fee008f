"""Fetch and push through real git (it speaks every transport, runs the remote's hooks).

Fetches check every object received (`fetch.fsckObjects`, whatever the
user's config says): git does not by default, and a tree with duplicate
names, `..` or `.git` is how a shared trail would write outside the work tree
on restore. Such an object fails the whole fetch, nothing is stored, and the
error names the object and git's check, which the user may turn off for a
remote they trust (`fetch.fsck.<check>=ignore`).

Pushes are `--atomic`: without it git moves each ref of a push in its own
transaction, so a checkpoint ref could land without its event log. A push
only fast-forwards (no `+`): a remote ref that moved since we fetched makes
git refuse the whole push, which is the compare-and-swap of the remote side.

Both run with `GIT_REF_PARANOIA=0`: git then skips a ref of ours at an object that
is not stored when it lists every ref (the objects a fetch need not ask for, its
connectivity check), instead of failing the whole fetch or push with "did not send
all necessary objects". Such a ref is named and left out by the caller
(`store/share.py`).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from git_agentckpt.errors import CkptError, CorruptError, LockedError, OperationFailed, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import error_lines, run_git
from git_agentckpt.git.stream import run_git_streaming
from git_agentckpt.git.syserr import git_failure

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# git's report of an object that fails fsck: "error: object <id>: <check>: <text>"
_FSCK_ERROR = re.compile(r"^error: object ([0-9a-f]{40,64}): (\w+): (.*)$", re.MULTILINE)
# git's lockfile.c: "Unable to create '<path>.lock': File exists." (a remote's lines
# come prefixed with "remote: ")
_LOCK_EXISTS = re.compile(r"^(remote: )?.*Unable to create '([^']+\.lock)': File exists", re.M)
_UNPACK_FAILED = ("remote unpack failed", "(unpacker error)")
URL_HINT = "check the remote's name or URL and your access to it"
_SKIP_BROKEN_REFS = {"GIT_REF_PARANOIA": "0"}  # module doc


def remote_key(repo: GitRepo, remote: str) -> str:
    """A ref-safe name for `remote`: its own name when configured, else one from its URL."""
    if remote.startswith("-"):
        raise UsageError(f"bad remote {remote!r}", hint="name a remote or a URL")
    if _NAME.match(remote) and repo.config_get(f"remote.{remote}.url"):
        return remote
    return "url-" + hashlib.sha1(remote.encode(), usedforsecurity=False).hexdigest()[:12]


def _run(
    repo: GitRepo, args: list[str], on_progress: Callable[[bytes], None] | None
) -> subprocess.CompletedProcess[bytes]:
    """git with `--progress` when `on_progress` takes its meters (read as git writes them)."""
    if on_progress is None:
        return run_git(args, cwd=repo.workdir, env=_SKIP_BROKEN_REFS, check=False)
    at = args.index("--")  # --quiet would silence the local side's meters (unpacking)
    args = [*(a for a in args[:at] if a != "--quiet"), "--progress", *args[at:]]
    return run_git_streaming(args, cwd=repo.workdir, env=_SKIP_BROKEN_REFS, on_stderr=on_progress)


def fetch_into(
    repo: GitRepo,
    remote: str,
    refspecs: Sequence[tuple[str, str]],
    on_progress: Callable[[bytes], None] | None = None,
) -> None:
    """Fetch `src` refs (globs allowed) of `remote` into local `dst` refs, forced.
    `on_progress` gets git's progress output (`--progress`) as it comes."""
    specs = [f"+{src}:{dst}" for src, dst in refspecs]
    args = ["fetch", "--no-tags", "--no-write-fetch-head", "--quiet", "--", remote, *specs]
    proc = _run(repo, ["-c", "fetch.fsckObjects=true", *args], on_progress)
    if proc.returncode != 0:
        raise _fetch_error(repo, remote, proc.stderr)


def _fetch_error(repo: GitRepo, remote: str, stderr: bytes) -> CkptError:
    """Why `git fetch` failed: a crafted object, a lock left here, the local disk, or the
    remote itself."""
    text = stderr.decode("utf-8", "replace")
    refused_object = _FSCK_ERROR.search(text)
    if refused_object:
        oid, check, why = refused_object.groups()
        return CorruptError(
            f"git fetch {remote} refused object {oid} ({check}: {why}): nothing was fetched",
            hint="the remote holds a crafted or damaged object; if you trust it, allow it "
            f"with `git -c fetch.fsck.{check}=ignore ckpt fetch` (or push)",
        )
    lock = _LOCK_EXISTS.search(text)
    if lock and not lock.group(1):
        return LockedError(
            f"git fetch {remote} failed: {os.path.normpath(lock.group(2))} exists "
            "(a git command holds it, or a killed one left it)",
            hint="if no git command runs here, `git ckpt doctor` removes stale locks; "
            "then run the command again",
        )
    refused = git_failure(stderr, repo.git_dir, f"git fetch {remote} failed")
    if refused is not None:
        return refused
    return OperationFailed(f"git fetch {remote} failed: {_last_error(stderr)}", hint=URL_HINT)


@dataclass(frozen=True)
class PushedRef:
    ref: str
    flag: str  # git's porcelain flag: ' ' fast-forward, '*' new, '=' up to date, '!' rejected
    summary: str

    @property
    def rejected(self) -> bool:
        return self.flag == "!"


def push_refs(
    repo: GitRepo,
    remote: str,
    refs: Sequence[str],
    on_progress: Callable[[bytes], None] | None = None,
) -> list[PushedRef]:
    """Push `refs` to the same names on `remote`, atomically and fast-forward only.
    `on_progress` gets git's progress output (`--progress`) as it comes."""
    proc = _run(
        repo,
        ["push", "--atomic", "--porcelain", "--", remote, *(f"{r}:{r}" for r in refs)],
        on_progress,
    )
    out: list[PushedRef] = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1 and ":" in parts[1]:
            out.append(PushedRef(parts[1].split(":", 1)[1], parts[0], parts[2]))
    if proc.returncode != 0:
        error = _push_error(remote, proc.stderr, out)
        if error is not None:
            raise error
    return out


def _push_error(remote: str, stderr: bytes, pushed: list[PushedRef]) -> CkptError | None:
    """Why `git push` failed, or None when refs were only refused as a lost race (the
    caller fetches, merges and pushes again).

    A remote that cannot store the objects (its disk is full: "unpacker error") will
    not take them on a retry either. A lock on the remote is a race when a push is
    running there, so it is retried; named here only when the lock is a file on this
    machine that has not changed for a while (a remote given as a path).
    """
    text = stderr.decode("utf-8", "replace")
    local_hook = _pre_push_refusal(remote, text)
    if local_hook is not None:
        return local_hook
    if any(s in text for s in _UNPACK_FAILED) or any("unpacker error" in p.summary for p in pushed):
        refused = git_failure(stderr, remote, f"git push {remote} failed", local=False)
        if refused is not None:
            return refused
        said = [x.strip() for x in text.splitlines() if x.startswith("remote:")]
        remote_errors = [x for x in said if "error" in x or "fatal" in x]
        detail = remote_errors[0] if remote_errors else _last_error(stderr)
        return OperationFailed(
            f"git push {remote} failed: the remote could not store the objects ({detail})",
            hint="check the remote's disk and permissions; nothing was lost here",
        )
    lock = _LOCK_EXISTS.search(text)
    if lock and _stale_file(lock.group(2)):
        return LockedError(
            f"git push {remote} failed: the remote's lock {os.path.normpath(lock.group(2))} "
            "exists and has not changed for a minute (a killed git left it?)",
            hint="if no git command runs in that repository, `git ckpt -C <it> doctor` "
            "removes stale locks; then run the command again",
        )
    rejected = [p for p in pushed if p.rejected]
    if rejected and all(_lost_race(p.summary, text) for p in rejected):
        return None
    if rejected:  # refused by the remote for a reason a retry cannot change (a hook, a guard)
        said = [x.strip() for x in text.splitlines() if x.startswith("remote:")]
        ours = _ckpt_refusal(remote, said)
        if ours is not None:
            return ours
        why = "; ".join(said[-3:]) or _last_error(stderr)
        return OperationFailed(
            f"git push {remote} was refused: {rejected[0].ref} {rejected[0].summary} ({why})",
            hint="the remote's hooks refused the update; nothing was changed there",
        )
    refused = git_failure(stderr, remote, f"git push {remote} failed", local=False)
    return refused or OperationFailed(
        f"git push {remote} failed: {_last_error(stderr)}", hint=URL_HINT
    )


def _pre_push_refusal(remote: str, text: str) -> CkptError | None:
    """The refusal of this clone's `git ckpt` pre-push hook (`audit/prepush.py`), on one
    line: what it found (the first three) and its first fix."""
    lines = [x.strip() for x in text.splitlines()]
    if not any(x.startswith("git ckpt: refused push to ") for x in lines):
        return None
    found = [x[len("git ckpt:") :].strip() for x in lines if x.startswith("git ckpt:   ")]
    fixes = [x[len("git ckpt: ") :] for x in lines if x.startswith("git ckpt: fix: ")]
    heads = [x[len("git ckpt: refused push to ") :] for x in lines if "refused push to" in x]
    more = [f"and {len(found) - 3} more"] if len(found) > 3 else []
    return OperationFailed(
        f"git push {remote} was refused by this clone's pre-push hook: "
        + "; ".join(heads[:1] + found[:3] + more),
        hint=fixes[0] if fixes else "see `git push` for the details",
    )


def _ckpt_refusal(remote: str, said: list[str]) -> CkptError | None:
    """The refusal of a server's `git ckpt` pre-receive hook (`audit/receive.py`), on one
    line: the refused refs with their reasons, and the first fix it gave."""
    ours = [
        x[len("remote:") :].strip()[len("git ckpt: ") :]
        for x in said
        if x[len("remote:") :].strip().startswith("git ckpt: ")
    ]
    refused = [x[len("refused ") :] for x in ours if x.startswith("refused ")]
    if not refused:
        return None
    more = [f"and {len(refused) - 3} more"] if len(refused) > 3 else []
    fixes = [x for x in ours if x.startswith("fix: ")]
    return OperationFailed(
        f"git push {remote} was refused by the remote's pre-receive hook: "
        + "; ".join(refused[:3] + more),
        hint=(fixes[0] if fixes else "") + " (nothing was changed there)",
    )


# What git's porcelain says of a ref refused because another push got there first: the
# caller fetches, merges and pushes again. Anything else (a hook declined, the remote's
# guard refused the update) will be refused again.
_RACE_REASONS = (
    "fetch first",
    "non-fast-forward",
    "stale info",
    "atomic push failed",
    "cannot lock ref",
    "incorrect old value",
)


# The remote lost a race at its own ref lock: the porcelain says "atomic transaction
# failed" and the remote's stderr "cannot lock ref '...': is at X but expected Y".
_REMOTE_MOVED = re.compile(r"cannot lock ref '[^']+': is at [0-9a-f]+ but expected [0-9a-f]+")


def _lost_race(summary: str, stderr: str) -> bool:
    if any(reason in summary for reason in _RACE_REASONS):
        return True
    return "atomic transaction failed" in summary and bool(_REMOTE_MOVED.search(stderr))


def _stale_file(path: str, seconds: float = 60.0) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > seconds
    except OSError:
        return False


def _last_error(stderr: bytes) -> str:
    errors = error_lines(stderr)
    return errors[-1] if errors else "no message"
