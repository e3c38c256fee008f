"""The signatures of a task's trail: which commits are signed, by whom, and what is wrong.

`git ckpt verify` calls `check_trail_signatures` for each task. The trail is the
checkpoint chain (first parents from the tip, down to the baseline, which is the
user's commit and not checked) and the event log (first parents: a union merge's
second parent is the other clone's history, whose events the merge copies).

Problems, each naming the commit:
- `bad-signature`: git says the signature does not match the commit (changed after
  signing), or its key expired or was revoked;
- `unknown-signer`: a valid signature from a key that is not allowed
  (`gpg.ssh.allowedSignersFile` for ssh, the keyring's trust for openpgp), or one
  that cannot be checked;
- `unsigned-commit`: an unsigned commit in a signed trail. A chain is signed from its
  first signed commit on (signing may be turned on in the middle of a task; the
  commits before stay as they were), or from its root when `require` is set.

Where no allowed signers file is set (a server that was never told who may sign),
valid ssh signatures cannot be judged: one warning per task says so
(`signatures-unchecked`), instead of an error for every signed commit; bad
signatures and unsigned commits in a signed trail are still errors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from git_agentckpt.audit.problems import Problem
from git_agentckpt.errors import CkptError, CorruptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.signing import (
    BAD,
    GOOD,
    UNCHECKED,
    UNKNOWN_SIGNER,
    UNSIGNED,
    SignatureCheck,
    check_chain_signatures,
    check_signatures,
)
from git_agentckpt.model import JSON
from git_agentckpt.store.checkpoints import parse_checkpoint
from git_agentckpt.store.refs import TaskName

CHAINS = ("checkpoints", "events")
_KIND = {BAD: "bad-signature", UNKNOWN_SIGNER: "unknown-signer", UNSIGNED: "unsigned-commit"}


@dataclass(frozen=True)
class SignatureProblem:
    task: str
    chain: str  # checkpoints | events
    commit: str
    kind: str  # bad-signature | unknown-signer | unsigned-commit
    detail: str
    signer: str = ""
    key: str = ""

    def message(self) -> str:
        what = "checkpoint" if self.chain == "checkpoints" else "event log"
        where = f"task {self.task}: {what} commit {self.commit[:12]}"
        by = f" (signer {self.signer or self.key})" if self.signer or self.key else ""
        if self.kind == "unsigned-commit":
            return f"{where} is unsigned in a signed trail"
        return f"{where}{by}: {self.detail}"

    def as_problem(self) -> Problem:
        """As `verify` reports it (`audit/problems.py`)."""
        what = "checkpoint" if self.chain == "checkpoints" else "event log commit"
        by = f" by {self.signer or self.key}" if self.signer or self.key else ""
        if self.kind == "unsigned-commit":
            detail = f"the {what} is unsigned, after signed ones in its chain"
        else:
            detail = f"{self.detail}{by}"
        return Problem(self.task, self.kind, self.commit, detail)

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
    unchecked: int = 0  # signatures git cannot judge here (no allowed signers file)

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
            "unchecked": self.unchecked,
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


def chain_problems(
    task: str, chain: str, checks: list[SignatureCheck], require: bool
) -> list[SignatureProblem]:
    """The problems of one chain (`checks` oldest first)."""
    problems: list[SignatureProblem] = []
    signed_trail = require
    for check in checks:
        if check.status in (GOOD, UNCHECKED):
            signed_trail = True
            continue
        if check.status == UNSIGNED and not signed_trail:
            continue
        signed_trail = signed_trail or check.status != UNSIGNED
        problems.append(
            SignatureProblem(
                task,
                chain,
                check.commit,
                _KIND[check.status],
                check.detail,
                check.signer,
                check.key,
            )
        )
    return problems


def signatures_of(
    repo: GitRepo,
    task: str,
    checkpoints: list[str],
    events_tip: str | None,
    *,
    require: bool = False,
) -> TrailSignatures:
    """Check the signatures of `checkpoints` (oldest first) and of the event log's
    first-parent chain from `events_tip`, with git."""
    found = check_signatures(repo, checkpoints)
    chains = {
        "checkpoints": [found[c] for c in checkpoints if c in found],
        "events": check_chain_signatures(repo, events_tip) if events_tip else [],
    }
    if not allowed_signers_set(repo):  # ssh keys cannot be judged here: not an error each
        chains = {name: [_unchecked(c) for c in checks] for name, checks in chains.items()}
    problems: list[SignatureProblem] = []
    for chain, checks in chains.items():
        problems += chain_problems(task, chain, checks, require)
    every = [c for checks in chains.values() for c in checks]
    signed = [c for c in every if c.status != UNSIGNED]
    good = [c for c in signed if c.status == GOOD]
    return TrailSignatures(
        task=task,
        commits=len(every),
        signed=len(signed),
        good=len(good),
        signers=tuple(sorted({c.signer or c.key for c in good})),
        problems=tuple(problems),
        unchecked=sum(1 for c in every if c.status == UNCHECKED),
    )


def allowed_signers_set(repo: GitRepo) -> bool:
    """Whether git here can tell which ssh keys are allowed (`gpg.ssh.allowedSignersFile`
    names an existing file; git reads it relative to the directory it runs in)."""
    value = repo.config_get("gpg.ssh.allowedSignersFile")
    if not value:
        return False
    path = os.path.join(repo.workdir, os.path.expanduser(value))
    return os.path.isfile(path)


def _unchecked(check: SignatureCheck) -> SignatureCheck:
    """An ssh signature that is valid, judged where no allowed signers file is set."""
    if check.code == "U" and check.key.startswith("SHA256:"):
        return replace(check, status=UNCHECKED, detail="no allowed signers file to judge the key")
    return check


def check_trail_signatures(
    repo: GitRepo, task: TaskName, *, require: bool = False
) -> TrailSignatures:
    """Check every signature of `task`'s trail with git; `require`: every commit signed."""
    return signatures_of(
        repo,
        task.name,
        checkpoint_commits(repo, task),
        repo.read_ref(task.events_ref),
        require=require,
    )


def verify_problems(
    repo: GitRepo, task: str, checkpoints: list[str], events_tip: str | None
) -> tuple[list[Problem], int]:
    """`git ckpt verify`'s part: the signature problems of one task, as its problems, and
    how many good signatures were seen. `checkpoints` are the chain verify walked (oldest
    first), `events_tip` the log's tip."""
    try:
        found = signatures_of(repo, task, checkpoints, events_tip)
    except CkptError as exc:  # objects missing: verify names them itself
        return [Problem(task, "unreadable", "signatures", exc.one_line()[:200])], 0
    problems = [p.as_problem() for p in found.problems]
    if found.unchecked:
        problems.append(
            Problem(
                task,
                "signatures-unchecked",
                "gpg.ssh.allowedSignersFile",
                f"{found.unchecked} signed commit(s) cannot be checked here: no allowed signers "
                "file tells whose keys are allowed; set gpg.ssh.allowedSignersFile",
                "warning",
            )
        )
    return problems, found.good
