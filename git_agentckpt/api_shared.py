"""The facade's calls on a work tree's settings, trust and shared trail: a part of
`api.Checkpointer` (it inherits them), kept apart so that each module stays small.

Settings (`.agent/ckpt.toml`), trust (design section 5: approvals need a person at a
terminal), sharing (design section 6) and housekeeping. The use cases are imported
when first called, as in `api`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from git_agentckpt.api_paths import doctor
from git_agentckpt.errors import CkptError, NotFound
from git_agentckpt.store.workspace import Workspace

if TYPE_CHECKING:
    from git_agentckpt.audit.problems import VerifyReport
    from git_agentckpt.contracts.approvals import PendingCommand
    from git_agentckpt.contracts.trust import TrustEntry
    from git_agentckpt.store.doctor import DoctorReport
    from git_agentckpt.store.share import ShareResult


class SharedCalls(Workspace):
    """Settings, trust, sharing and housekeeping of a Checkpointer."""

    # -- settings (.agent/ckpt.toml) ----------------------------------------------------

    def config_get(self, key: str) -> Any:
        """A setting's value (dotted key); a policy key not in the file gives its default."""
        from git_agentckpt.config_edit import get_setting

        return get_setting(self.repo.workdir, key)

    def config_set(self, key: str, raw: str, add: bool = False) -> Any:
        """Set a setting, keeping the file's comments; validated first. The parsed value.
        A key the tool does not read is refused, unless `add` and it is in a table of
        the user's own."""
        from git_agentckpt.config_edit import set_setting
        from git_agentckpt.tick import load_policy

        value = set_setting(self.repo.workdir, key, raw, add)
        self._settings = None
        load_policy(self)
        return value

    # -- trust (design section 5): the CLI asks the person, at a terminal -------------

    def pending_approvals(self) -> list[PendingCommand]:
        """Command checks of the contract and of recent checkpoints not yet approved here."""
        from git_agentckpt.contracts.approvals import pending_commands, tip_assertions
        from git_agentckpt.contracts.engine import load_contract
        from git_agentckpt.contracts.trust import TrustStore

        contract = load_contract(self.repo.workdir)
        return pending_commands(self.repo, contract, TrustStore(), tip_assertions(self))

    def approve(self, pending: PendingCommand, note: str) -> None:
        """Record a person's approval of one command (exact argv, this clone only).

        Only with a person at a terminal in this process (design section 5), from
        Python as from the CLI: an agent in a script cannot approve its own commands."""
        from git_agentckpt.contracts.engine import repo_identity
        from git_agentckpt.contracts.trust import TrustStore
        from git_agentckpt.recovery.person import NeedsTerminal, stdin_is_terminal

        if not stdin_is_terminal():
            raise NeedsTerminal(
                "approving a command needs a person at a terminal, and stdin is not one",
                hint="run `git ckpt trust` in a terminal",
            )

        TrustStore().approve(repo_identity(self.repo), pending.argv, note=note)

    def approvals(self) -> list[TrustEntry]:
        """The commands approved for this clone."""
        from git_agentckpt.contracts.engine import repo_identity
        from git_agentckpt.contracts.trust import TrustStore

        return TrustStore().list(repo_identity(self.repo))

    def revoke_approval(self, fingerprint: str) -> None:
        """Remove one approval (its fingerprint or a unique prefix of 8+ digits)."""
        from git_agentckpt.contracts.engine import repo_identity
        from git_agentckpt.contracts.trust import TrustStore

        if not TrustStore().revoke(repo_identity(self.repo), fingerprint):
            raise NotFound(f"no approval {fingerprint!r} for this repository", hint="see --list")

    def repo_identity(self) -> str:
        """What approvals are bound to: this clone."""
        from git_agentckpt.contracts.engine import repo_identity

        return repo_identity(self.repo)

    # -- sharing (design section 6) and housekeeping ----------------------------------

    def fetch(self, remote: str = "origin") -> ShareResult:
        """Fetch another clone's audit trail from `remote` and merge it into ours."""
        from git_agentckpt.store import share

        return share.fetch(self.repo, self.log, remote)

    def push(self, remote: str = "origin") -> ShareResult:
        """Fetch and merge, then push every agent ref to `remote` in one atomic push; the
        tips pushed go into the witness file (`audit/witness.py`), outside the repository.
        What is about to leave is scanned for secrets first, as the pre-push hook does
        (`audit/prepush.py`), whether the hook is installed or not: a finding sends nothing."""
        from git_agentckpt.audit.prepush import refuse_secrets
        from git_agentckpt.store import share

        def scan(refs: list[str]) -> None:
            for line in refuse_secrets(self.repo, remote, refs).not_scanned():
                self.store.warn(line)

        result = share.push(self.repo, self.log, remote, scan)
        self._witness(result, remote)
        return result

    def _witness(self, result: ShareResult, remote: str) -> None:
        from git_agentckpt.audit import witness
        from git_agentckpt.store.refs import EVENTS

        pushed: dict[str, tuple[str, int | None]] = {}
        for p in result.pushed:
            tip = self.repo.read_ref(p.ref)
            if p.rejected or tip is None:
                continue
            seq = self.log.last_seq_at(tip) if p.ref.startswith(EVENTS) else None
            pushed[p.ref] = (tip, seq)
        if not pushed:
            return
        try:  # the push happened: a witness that cannot be written does not undo it
            witness.record(
                self.repo, pushed, self.log.redactor.text(remote), witness.witness_path(self.repo)
            )
        except (OSError, CkptError) as exc:
            self.store.warn(f"the witness file was not updated: {exc}")

    def verify(
        self, tasks: Sequence[str] = (), against: str | None = None, witness: str | None = None
    ) -> VerifyReport:
        """Check the trail end to end (`audit/verify.py`); see the module-level `verify`."""
        from git_agentckpt.audit.verify import verify_trail

        return verify_trail(self.repo, tasks, against=against, witness_file=witness)

    def doctor(self, dry_run: bool = False) -> DoctorReport:
        """Stale locks and temporary files of killed writers, removed when provably orphaned."""
        return doctor(self.repo.workdir, dry_run=dry_run)
