"""The signatures of a task's trail: which commits are signed, by whom, and what is wrong.

`git ckpt verify` calls `check_trail_signatures` for each task. The trail is the
checkpoint chain (first parents from the tip, down to the baseline, which is the
user's commit and not checked) and the event log (first parents: a union merge's
second parent is the other clone's history, whose events the merge copies).

Problems, each naming the commit:
- `bad_signature`: git says the signature does not match the commit (changed after
  signing), or its key expired or was revoked;
- `unknown_signer`: a valid signature from a key that is not allowed
  (`gpg.ssh.allowedSignersFile` for ssh, the keyring's trust for openpgp), or one
  that cannot be checked;
- `unsigned`: an unsigned commit in a signed trail. A chain is signed from its
  first signed commit on (signing may be turned on in the middle of a task; the
  commits before stay as they were), or from its root when `require` is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from git_agentckpt.errors import CorruptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.signing import (
    BAD,
    GOOD,
    UNKNOWN_SIGNER,
    UNSIGNED,
    SignatureCheck,
    check_signatures,
)
from git_agentckpt.model import JSON
from git_agentckpt.store.checkpoints import parse_checkpoint
from git_agentckpt.store.refs import TaskName

CHAINS = ("checkpoints", "events")
_KIND = {BAD: "bad_signature", UNKNOWN_SIGNER: "unknown_signer", UNSIGNED: "unsigned"}


@dataclass(frozen=True)
class SignatureProblem:
    task: str
    chain: str  # checkpoints | events
    commit: str
    kind: str  # bad_signature | unknown_signer | unsigned
    detail: str
    signer: str = ""
    key: str = ""

    def message(self) -> str:
        what = "checkpoint" if self.chain == "checkpoints" else "event log"
        where = f"task {self.task}: {what} commit {self.commit[:12]}"
        by = f" (signer {self.signer or self.key})" if self.signer or self.key else ""
        if self.kind == "unsigned":
            return f"{where} is unsigned in a signed trail"
        return f"{where}{by}: {self.detail}"

    def to_json(self) -> dict[str, JSON]:
        return {
            "task": self.task,
            "chain": self.chain,
            "commit": self.commit,
            "kind": self.kind,
            "detail": self.detail,
            "signer": self.signer,
            "key": self.key,
            "message": self.message(),
        }


@dataclass(frozen=True)
class TrailSignatures:
    """What the signature checks of one task found."""

    task: str
    commits: int  # commits checked, both chains
    signed: int  # of them, signed (whatever the verdict)
    good: int
    signers: tuple[str, ...]  # the allowed signers seen, sorted
    problems: tuple[SignatureProblem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, JSON]:
        return {
            "task": self.task,
            "commits": self.commits,
            "signed": self.signed,
            "good": self.good,
            "signers": list(self.signers),
            "problems": [p.to_json() for p in self.problems],
        }


def checkpoint_commits(repo: GitRepo, task: TaskName) -> list[str]:
    """The task's checkpoint commits, oldest first (first parents, down to the baseline)."""
    out: list[str] = []
    current = repo.read_ref(task.checkpoints_ref)
    while current:
        info = repo.read_commit(current)
        try:
            ckpt = parse_checkpoint(info)
        except CorruptError:  # damaged trailers: still a commit of the chain
            ckpt = None
            out.append(info.id)
            current = info.parents[0] if info.parents else None
            continue
        if ckpt is None or ckpt.task != task.name:
            break
        out.append(info.id)
        current = ckpt.parent
    out.reverse()
    return out


def event_commits(repo: GitRepo, task: TaskName) -> list[str]:
    """The event log's commits, oldest first (first parents)."""
    tip = repo.read_ref(task.events_ref)
    out = [info.id for info in repo.walk(tip)] if tip else []
    out.reverse()
    return out


def chain_problems(
    task: str, chain: str, commits: list[str], checks: dict[str, SignatureCheck], require: bool
) -> list[SignatureProblem]:
    """The problems of one chain, oldest first (`commits` oldest first)."""
    problems: list[SignatureProblem] = []
    signed_trail = require
    for commit in commits:
        check = checks[commit]
        if check.status == GOOD:
            signed_trail = True
            continue
        if check.status == UNSIGNED and not signed_trail:
            continue
        signed_trail = signed_trail or check.status != UNSIGNED
        problems.append(
            SignatureProblem(
                task, chain, commit, _KIND[check.status], check.detail, check.signer, check.key
            )
        )
    return problems


def check_trail_signatures(
    repo: GitRepo, task: TaskName, *, require: bool = False
) -> TrailSignatures:
    """Check every signature of `task`'s trail with git; `require`: every commit signed."""
    chains = {
        "checkpoints": checkpoint_commits(repo, task),
        "events": event_commits(repo, task),
    }
    checks = check_signatures(repo, [c for commits in chains.values() for c in commits])
    problems: list[SignatureProblem] = []
    for chain, commits in chains.items():
        problems += chain_problems(task.name, chain, commits, checks, require)
    signed = [c for c in checks.values() if c.status != UNSIGNED]
    good = [c for c in signed if c.status == GOOD]
    return TrailSignatures(
        task=task.name,
        commits=len(checks),
        signed=len(signed),
        good=len(good),
        signers=tuple(sorted({c.signer or c.key for c in good})),
        problems=tuple(problems),
    )
