"""Command checks awaiting this user's approval: the contract's, and checkpoints'.

`git ckpt trust` lists them (each argv once) and asks a person at a terminal;
see `contracts/trust.py` for the store and `engine.make_command_runner` for
how approved commands run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from git_agentckpt.contracts.engine import command_argv, command_timeout, repo_identity
from git_agentckpt.contracts.schema import Assertion, Check, Contract, Severity, parse_assertions
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.display import escape_for_display
from git_agentckpt.errors import CkptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON
from git_agentckpt.store.workspace import Workspace


@dataclass(frozen=True)
class PendingCommand:
    constraint: str
    severity: Severity
    argv: tuple[str, ...]
    timeout: float
    fingerprint: str
    line: int | None

    def to_json(self) -> dict[str, JSON]:
        return {**asdict(self), "argv": list(self.argv), "display": escape_for_display(self.argv)}


def pending_commands(
    repo: GitRepo,
    contract: Contract | None,
    trust: TrustStore,
    assertions: Sequence[tuple[str, Assertion]] = (),
) -> list[PendingCommand]:
    """The `command` checks this user has not approved (each argv once): the contract's,
    then `assertions` (`(where, assertion)`: the command assertions that resume would
    run, which may have come by fetch)."""
    repo_id = repo_identity(repo)
    out: list[PendingCommand] = []
    seen: set[str] = set()
    checks: list[tuple[str, Severity, Check, int | None]] = [
        (c.id, c.severity, c.check, c.line)
        for c in (contract.constraints if contract is not None else ())
        if c.check is not None
    ]
    checks += [(f"{a.id} ({where})", "block", a.check, None) for where, a in assertions]
    for name, severity, check, line in checks:
        if check.kind != "command":
            continue
        argv = command_argv(check)
        fp = trust.fingerprint(repo_id, argv)
        if not argv or fp in seen or trust.is_trusted(repo_id, argv):
            continue
        seen.add(fp)
        out.append(PendingCommand(name, severity, argv, command_timeout(check), fp, line))
    return out


def tip_assertions(ck: Workspace, depth: int = 50) -> list[tuple[str, Assertion]]:
    """The assertions of each task's latest `depth` checkpoints: those resume may check
    (its start, or an earlier checkpoint it rolls back to). Unreadable notes are skipped
    here: resume reports them."""
    out: list[tuple[str, Assertion]] = []
    for task in ck.store.tasks():
        for n, cp in enumerate(ck.store.chain(task)):
            if n >= depth:
                break
            try:
                raw = ck.store.assertions_note(cp.commit)
                parsed = parse_assertions(raw, source=f"assertions of {cp.id}") if raw else ()
            except (CkptError, ValueError):
                continue
            out.extend((f"assertion of task {task}, checkpoint {cp.id}", a) for a in parsed)
    return out
