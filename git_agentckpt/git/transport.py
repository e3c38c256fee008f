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
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from git_agentckpt.errors import CorruptError, OperationFailed, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import error_lines, run_git

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# git's report of an object that fails fsck: "error: object <id>: <check>: <text>"
_FSCK_ERROR = re.compile(r"^error: object ([0-9a-f]{40,64}): (\w+): (.*)$", re.MULTILINE)


def remote_key(repo: GitRepo, remote: str) -> str:
    """A ref-safe name for `remote`: its own name when configured, else one from its URL."""
    if remote.startswith("-"):
        raise UsageError(f"bad remote {remote!r}", hint="name a remote or a URL")
    if _NAME.match(remote) and repo.config_get(f"remote.{remote}.url"):
        return remote
    return "url-" + hashlib.sha1(remote.encode(), usedforsecurity=False).hexdigest()[:12]


def fetch_into(repo: GitRepo, remote: str, refspecs: Sequence[tuple[str, str]]) -> None:
    """Fetch `src` refs (globs allowed) of `remote` into local `dst` refs, forced."""
    specs = [f"+{src}:{dst}" for src, dst in refspecs]
    args = ["fetch", "--no-tags", "--no-write-fetch-head", "--quiet", "--", remote, *specs]
    proc = run_git(["-c", "fetch.fsckObjects=true", *args], cwd=repo.workdir, check=False)
    if proc.returncode != 0:
        refused = _FSCK_ERROR.search(proc.stderr.decode("utf-8", "replace"))
        if refused:
            oid, check, text = refused.groups()
            raise CorruptError(
                f"git fetch {remote} refused object {oid} ({check}: {text}): nothing was fetched",
                hint="the remote holds a crafted or damaged object; if you trust it, allow it "
                f"with `git -c fetch.fsck.{check}=ignore ckpt fetch` (or push)",
            )
        raise OperationFailed(
            f"git fetch {remote} failed: {_last_error(proc.stderr)}",
            hint="check the remote's name or URL and your access to it",
        )


@dataclass(frozen=True)
class PushedRef:
    ref: str
    flag: str  # git's porcelain flag: ' ' fast-forward, '*' new, '=' up to date, '!' rejected
    summary: str

    @property
    def rejected(self) -> bool:
        return self.flag == "!"


def push_refs(repo: GitRepo, remote: str, refs: Sequence[str]) -> list[PushedRef]:
    """Push `refs` to the same names on `remote`, atomically and fast-forward only."""
    proc = run_git(
        ["push", "--atomic", "--porcelain", "--", remote, *(f"{r}:{r}" for r in refs)],
        cwd=repo.workdir,
        check=False,
    )
    out: list[PushedRef] = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1 and ":" in parts[1]:
            out.append(PushedRef(parts[1].split(":", 1)[1], parts[0], parts[2]))
    if proc.returncode != 0 and not any(p.rejected for p in out):
        raise OperationFailed(
            f"git push {remote} failed: {_last_error(proc.stderr)}",
            hint="check the remote's name or URL and your access to it",
        )
    return out


def _last_error(stderr: bytes) -> str:
    errors = error_lines(stderr)
    return errors[-1] if errors else "no message"
