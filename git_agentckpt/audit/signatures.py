"""The signatures of a task's trail: which commits are signed, by whom, and what is wrong.

`git ckpt verify` calls `verify_problems` for each task. The trail is the
checkpoint chain (first parents from the tip, down to the baseline, which is the
user's commit and not checked), the event log (first parents: a union merge's
second parent is the other clone's history, whose events the merge copies) and the
recovery reports (first parents).

Problems, each naming the commit:
- `bad-signature`: git says the signature does not match the commit (changed after
  signing), or its key expired or was revoked;
- `unknown-signer`: a valid signature from a key that is not allowed
  (`gpg.ssh.allowedSignersFile` for ssh, the keyring's trust for openpgp), or one
  that cannot be checked;
- `unsigned-commit`: an unsigned commit in a signed trail. A chain is signed from its
  first signed commit on (signing may be turned on in the middle of a task; the
  commits before stay as they were). The checkpoints and the log sign each other's
  start: the log commit that holds the first signed checkpoint's `checkpoint.prepare`
  was written in that checkpoint's transaction, so it and every later log commit must
  be signed (a log rewritten unsigned beside a signed chain is caught), and so must
  every checkpoint prepared at or after the first signed log commit. Where
  `ckpt.sign` is `true`, the newest commit of each chain must be signed too (a trail
  rewritten unsigned as a whole).

Where no allowed signers file is set (a server that was never told who may sign),
valid ssh signatures cannot be judged: one warning per task says so
(`signatures-unchecked`), instead of an error for every signed commit; bad
signatures and unsigned commits in a signed trail are still errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from git_agentckpt.audit.events_check import scan_log
from git_agentckpt.audit.per_commit import CommitContext
from git_agentckpt.audit.problems import Problem
from git_agentckpt.errors import CkptError, CorruptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.signing import (
    BAD,
    GOOD,
    SIGN_SETTING,
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

CHAINS = ("checkpoints", "events", "reports")
_KIND = {BAD: "bad-signature", UNKNOWN_SIGNER: "unknown-signer", UNSIGNED: "unsigned-commit"}
_WHAT = {"checkpoints": "checkpoint", "events": "event log", "reports": "recovery report"}


@dataclass(frozen=True)
class SignatureProblem:
    task: str
    chain: str  # checkpoints | events | reports
    commit: str
    kind: str  # bad-signature | unknown-signer | unsigned-commit
    detail: str  # unsigned-commit: why the commit had to be signed
    signer: str = ""
    key: str = ""

    def message(self) -> str:
        where = f"task {self.task}: {_WHAT[self.chain]} commit {self.commit[:12]}"
        by = f" (signer {self.signer or self.key})" if self.signer or self.key else ""
        if self.kind == "unsigned-commit":
            return f"{where} is unsigned in a signed trail"
        return f"{where}{by}: {self.detail}"

    def as_problem(self) -> Problem:
        """As `verify` reports it (`audit/problems.py`)."""
        by = f" by {self.signer or self.key}" if self.signer or self.key else ""
        if self.kind == "unsigned-commit":
            detail = f"the {_WHAT[self.chain]} commit is unsigned: {self.detail}"
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


@dataclass(frozen=True)
class Trail:
    """The commits of one task whose signatures are checked, and how its chains link."""

    task: str
    checkpoints: list[str]  # the chain, oldest first
    events_tip: str | None
    reports_tip: str | None = None
    # checkpoint commit -> the log commit that holds its checkpoint.prepare
    prepared_in: Mapping[str, str] = field(default_factory=dict)


# (index, why): from the commit at `index` on, every commit of a chain must be signed
Start = tuple[int, str]


def chain_problems(
    task: str, chain: str, checks: list[SignatureCheck], start: Start
) -> list[SignatureProblem]:
    """The problems of one chain (`checks` oldest first)."""
    problems: list[SignatureProblem] = []
    for i, check in enumerate(checks):
        if check.status in (GOOD, UNCHECKED) or (check.status == UNSIGNED and i < start[0]):
            continue
        detail = start[1] if check.status == UNSIGNED else check.detail
        kind = _KIND[check.status]
        problems.append(
            SignatureProblem(task, chain, check.commit, kind, detail, check.signer, check.key)
        )
    return problems


def _first_signed(checks: list[SignatureCheck]) -> int:
    return next((i for i, c in enumerate(checks) if c.status != UNSIGNED), len(checks))


def signed_starts(
    chains: Mapping[str, list[SignatureCheck]], prepared_in: Mapping[str, str], tips: bool
) -> dict[str, Start]:
    """Per chain, from where on every commit must be signed (`tips`: at least its newest)."""
    ckpts, events = chains["checkpoints"], chains["events"]
    at = {c.commit: i for i, c in enumerate(events)}
    first = {name: _first_signed(checks) for name, checks in chains.items()}
    starts = {name: (i, "it follows signed commits in its chain") for name, i in first.items()}
    if first["checkpoints"] < len(ckpts):
        prepare = at.get(prepared_in.get(ckpts[first["checkpoints"]].commit, ""), len(events))
        why = "the task's checkpoints are signed from before it (the log was rewritten?)"
        starts["events"] = min(starts["events"], (prepare, why))
    prepared = [at.get(prepared_in.get(c.commit, ""), -1) for c in ckpts]
    since = next((i for i, p in enumerate(prepared) if p >= first["events"]), len(ckpts))
    why = "the task's event log is signed from before its prepare (the chain was rewritten?)"
    starts["checkpoints"] = min(starts["checkpoints"], (since, why))
    for name, checks in chains.items():
        if tips and checks and starts[name][0] >= len(checks):
            starts[name] = (
                len(checks) - 1,
                "ckpt.sign is true here, so the newest commit of each chain must be signed",
            )
    return starts


def signatures_of(repo: GitRepo, trail: Trail, *, tips: bool = False) -> TrailSignatures:
    """Check the signatures of `trail`'s checkpoints and of the first-parent chains of its
    log and reports, with git; `tips`: the newest commit of each chain must be signed."""
    found = check_signatures(repo, trail.checkpoints)
    chains = {
        "checkpoints": [found[c] for c in trail.checkpoints if c in found],
        "events": check_chain_signatures(repo, trail.events_tip) if trail.events_tip else [],
        "reports": check_chain_signatures(repo, trail.reports_tip) if trail.reports_tip else [],
    }
    if not allowed_signers_set(repo):  # ssh keys cannot be judged here: not an error each
        chains = {name: [_unchecked(c) for c in checks] for name, checks in chains.items()}
    starts = signed_starts(chains, trail.prepared_in, tips)
    problems: list[SignatureProblem] = []
    for chain, checks in chains.items():
        problems += chain_problems(trail.task, chain, checks, starts[chain])
    every = [c for checks in chains.values() for c in checks]
    signed = [c for c in every if c.status != UNSIGNED]
    good = [c for c in signed if c.status == GOOD]
    return TrailSignatures(
        task=trail.task,
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


def check_trail_signatures(repo: GitRepo, task: TaskName, *, tips: bool = False) -> TrailSignatures:
    """Check every signature of `task`'s trail with git (`tips`: as with `ckpt.sign true`)."""
    events_tip = repo.read_ref(task.events_ref)
    scan = scan_log(CommitContext(repo, task.name), events_tip)
    trail = Trail(
        task.name,
        checkpoint_commits(repo, task),
        events_tip,
        repo.read_ref(task.reports_ref),
        scan.prepared_in,
    )
    return signatures_of(repo, trail, tips=tips)


def verify_problems(repo: GitRepo, trail: Trail) -> tuple[list[Problem], int]:
    """`git ckpt verify`'s part: the signature problems of one task, as its problems, and
    how many good signatures were seen. Where `ckpt.sign` is true, the newest commit of
    each chain must be signed."""
    try:
        found = signatures_of(repo, trail, tips=repo.config_bool(SIGN_SETTING, False))
    except CkptError as exc:  # objects missing: verify names them itself
        return [Problem(trail.task, "unreadable", "signatures", exc.one_line()[:200])], 0
    problems = [p.as_problem() for p in found.problems]
    if found.unchecked:
        problems.append(
            Problem(
                trail.task,
                "signatures-unchecked",
                "gpg.ssh.allowedSignersFile",
                f"{found.unchecked} signed commit(s) cannot be checked here: no allowed signers "
                "file tells whose keys are allowed; set gpg.ssh.allowedSignersFile",
                "warning",
            )
        )
    return problems, found.good
