"""The contract, validated whenever it changes, cheaply: the verdict cached by sha256.

A malformed contract (`severity: blocker`) must not wait for `check` or
`resume` to be noticed, at the worst moment. Commands that start or advance
a task ask `contract_status`: it reads the contract file, hashes it, and
returns the cached verdict when that content was already validated (the
parser, and the YAML module, are then never loaded); otherwise it parses,
caches the verdict in `.git/agent/contract-check.json` and returns it. The
key covers the file name, its bytes and the tool's version (a newer schema
may judge the same bytes differently).

What each command does with an invalid contract (see the man page):
`task start` refuses (exit 2): nothing is lost yet, and a task started on a
contract nobody can check would fail only at its first check or resume.
`create`, `step done` and `tick` take their checkpoint and warn on stderr,
naming file, line and key: refusing them would lose the work they protect
(a refused `step done` loses the step's completion).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches

from git_agentckpt import __version__
from git_agentckpt.errors import UsageError
from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import agent_dir
from git_agentckpt.settings import CONTRACT_FILENAMES, CONTRACTS_DIR

CACHE_FILE = "contract-check.json"
_CACHE_VERSION = 1


@dataclass(frozen=True)
class ContractStatus:
    path: str | None  # the contract file (relative to the working tree); None: there is none
    error: str | None = None  # `<file>:<line>: <key>: <what>` when it does not validate
    ids: tuple[str, ...] = ()  # the constraint ids it defines
    cached: bool = False  # the verdict came from the cache (nothing was parsed)

    @property
    def ok(self) -> bool:
        return self.error is None


class InvalidContract(UsageError):
    """`task start` on a contract that does not validate (exit 2)."""


def _read(workdir: str) -> list[tuple[str, bytes | None]]:
    """(relative path, bytes or None when unreadable) of each contract file present."""
    out: list[tuple[str, bytes | None]] = []
    for name in CONTRACT_FILENAMES:
        rel = f"{CONTRACTS_DIR}/{name}"
        full = os.path.join(workdir, rel)
        if not os.path.lexists(full):
            continue
        try:
            with open(full, "rb") as fh:
                out.append((rel, fh.read()))
        except OSError:
            out.append((rel, None))
    return out


def _key(found: list[tuple[str, bytes | None]]) -> str:
    digest = hashlib.sha256(f"{_CACHE_VERSION}\0{__version__}\0".encode())
    for rel, data in found:
        digest.update(rel.encode() + b"\0" + (b"-" if data is None else b"+" + data) + b"\0")
    return digest.hexdigest()


def _parse(found: list[tuple[str, bytes | None]]) -> ContractStatus:
    """Validate the bytes that were hashed (never a second read of the file)."""
    from git_agentckpt.contracts.schema import ContractError, load_contract_text

    if len(found) > 1:
        names = " and ".join(rel for rel, _ in found)
        return ContractStatus(found[0][0], f"{names}: more than one contract file; keep only one")
    rel, data = found[0]
    if data is None:
        return ContractStatus(rel, f"{rel}: cannot read the contract")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ContractStatus(rel, f"{rel}: not valid UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        contract = load_contract_text(text, rel)
    except ContractError as exc:
        return ContractStatus(rel, exc.one_line())
    return ContractStatus(rel, None, tuple(c.id for c in contract.constraints))


def _load_cache(path: str, key: str) -> ContractStatus | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("key") != key:
            return None
        error = doc["error"]
        return ContractStatus(
            doc["path"],
            error if isinstance(error, str) else None,
            tuple(str(i) for i in doc["ids"]),
            cached=True,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def contract_status(repo: GitRepo) -> ContractStatus:
    """The verdict on the working tree's contract (see the module doc)."""
    found = _read(repo.workdir)
    if not found:
        return ContractStatus(None)
    key = _key(found)
    cache = os.path.join(agent_dir(repo), CACHE_FILE)
    hit = _load_cache(cache, key)
    if hit is not None:
        return hit
    status = _parse(found)
    doc = {"v": 1, "key": key, "path": status.path, "error": status.error, "ids": status.ids}
    with contextlib.suppress(OSError):  # a cache: the verdict stands without it
        write_if_changed(cache, json.dumps(doc, separators=(",", ":")).encode())
    return status


def require_valid(status: ContractStatus, doing: str) -> None:
    """Refuse `doing` on a contract that does not validate."""
    if status.error is not None:
        raise InvalidContract(
            f"{doing} refused: the contract does not validate: {status.error}",
            hint=f"fix {status.path}, then run it again (`git ckpt check` shows the problem too)",
        )


def warning(status: ContractStatus) -> str | None:
    """The warning a command that went ahead prints on a contract that does not
    validate (the same line from every step of it, so it is printed once), or None."""
    if status.error is None:
        return None
    return (
        "the contract does not validate, so `check` and `resume` will refuse to run "
        f"until it is fixed (this command went ahead): {status.error}"
    )


def require_defined(status: ContractStatus, ids: Sequence[str]) -> None:
    """Refuse constraint ids the contract does not define (there would be no text for
    them in any brief). With no contract, every id is undefined."""
    require_valid(status, "task start")
    missing = [i for i in ids if i not in status.ids]
    if not missing:
        return
    first = missing[0]
    if status.path is None:
        raise UsageError(
            f"constraint {first!r} is defined nowhere: there is no contract file "
            f"({CONTRACTS_DIR}/constraints.yaml)",
            hint="define it there (`git ckpt init` writes a template), or leave --constraint out",
        )
    close = get_close_matches(first, status.ids, n=1, cutoff=0.6)
    defined = ", ".join(status.ids) or "none"
    raise UsageError(
        f"constraint {first!r} is not defined in {status.path} (defined: {defined})",
        hint=(f"did you mean {close[0]!r}? " if close else "")
        + f"add it to {status.path}, or leave it out",
    )
