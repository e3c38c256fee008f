"""What `git ckpt verify` finds: one `Problem` per finding, gathered in a `VerifyReport`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from git_agentckpt.model import JSON

Severity = Literal["error", "warning", "info"]

# What a hostile record could slip into a line: control characters (a newline would
# forge another problem line, an escape sequence would rewrite the terminal).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, limit: int = 300) -> str:
    """`text` on one line, control characters shown as escapes, cut at `limit`."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


# Every kind verify names, with what it means (the man page lists the same).
KINDS: dict[str, str] = {
    "missing-object": "a commit, tree, blob or note the trail needs is not stored",
    "object-corrupt": "an object's bytes do not hash to its id (changed in place)",
    "ref-damaged": "a ref points at something that is not a record of its task",
    "chain-broken": "checkpoint numbers or parents do not link up (checkpoints cut out)",
    "checkpoint-malformed": "a checkpoint commit's trailers cannot be read",
    "checkpoint-unprepared": "a checkpoint has no checkpoint.prepare event (forged or rewritten)",
    "commit-event-missing": "a checkpoint has no checkpoint.commit event (a crash, or deleted)",
    "event-order": "a checkpoint's events are out of order (commit before prepare)",
    "ref-moved-back": "a committed checkpoint is no longer reachable from its task's ref",
    "checkpoint-unreachable": "a committed checkpoint left the chain: the chain was rewritten",
    "committed-elsewhere": "a checkpoint committed by another clone, kept in its mirror",
    "event-malformed": "an event line is not valid JSON of a known version",
    "event-wrong-task": "an event names another task than the log it is in",
    "event-duplicate-id": "two events share one id (a forged or replayed event)",
    "log-digest-mismatch": "an event commit's content does not match its Log-Digest",
    "commit-metadata-edited": "an event commit's tree, author or committer differ from what "
    "the next commit's Parent-Head line recorded (rewritten)",
    "log-digest-missing": "an event commit has no Log-Digest after ones that have it",
    "log-undigested": "events written before Log-Digest existed: bound by git's hash only",
    "merge-unbacked": "a union merge carries an event the log it merged does not hold",
    "seq-gap": "event numbers skip: events were removed or the log was truncated",
    "seq-out-of-order": "event numbers go back or repeat: events reordered or inserted",
    "note-missing": "a checkpoint has no state note",
    "note-invalid": "a note is not JSON, of an unknown version, or fails its schema",
    "note-misplaced": "a note belongs to another task (copied)",
    "note-replaced": "a note differs from the one its checkpoint.prepare event named",
    "note-added": "an assertions note where the checkpoint.prepare event named none (added)",
    "report-replaced": "a recovery report's files differ from what the event that wrote "
    "them bound, or a bound report is gone (edited or removed after the fact)",
    "report-unbound": "a recovery report that no event of the log names (added by hand)",
    "task-missing": "a task whose checkpoint and event refs are gone while its notes, "
    "reports, a mirror, the witness file or the remote still hold it (deleted)",
    "claim-unbacked": "a step marked done has no step.end event and step-end checkpoint",
    "rolled-back": "a ref lacks what the remote copy, the remote or the witness file had",
    "diverged": "a checkpoint ref and its remote copy went separate ways",
    "bad-signature": "a signature does not match its commit (changed after signing), "
    "or its key expired or was revoked",
    "unknown-signer": "a valid signature by a key that is not allowed, or one git cannot check",
    "unsigned-commit": "an unsigned commit in a signed trail: after signed ones in its "
    "chain, beside the task's other signed chain, or the newest one with ckpt.sign true",
    "signatures-unchecked": "valid ssh signatures, but no allowed signers file here to judge them",
    "replaced-object": "a refs/replace/ ref makes plain git show another object instead of "
    "one of the trail (git ckpt reads the original)",
    "unreadable": "a record could not be checked at all (the detail says why)",
}


def read_error_kind(error: str) -> str:
    """The kind of problem a failed read is (`git/audit_read.py` errors)."""
    if error == "missing":
        return "missing-object"
    return "object-corrupt" if error.startswith("corrupt") else "unreadable"


@dataclass(frozen=True)
class Problem:
    task: str | None  # None: a problem of the store, not of one task
    kind: str  # one of KINDS
    where: str  # a ref, a commit id, an event id (`#seq id`), a file
    detail: str
    severity: Severity = "error"

    def one_line(self) -> str:
        task = f"task {printable(self.task)}: " if self.task is not None else ""
        where, detail = printable(self.where), printable(self.detail, 600)
        return f"{self.severity}: {task}{self.kind} at {where}: {detail}"

    def to_json(self) -> dict[str, JSON]:
        return {
            "task": self.task,
            "kind": self.kind,
            "where": self.where,
            "detail": self.detail,
            "severity": self.severity,
        }


@dataclass
class VerifyReport:
    tasks: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)  # what was read: counts
    sources: list[str] = field(default_factory=list)  # remote copies compared with
    _seen: set[Problem] = field(default_factory=set, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def add(self, problems: list[Problem]) -> None:
        for p in problems:  # a set: a hostile log can hold 100k bad lines
            if p not in self._seen:
                self._seen.add(p)
                self.problems.append(p)

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def lines(self) -> list[str]:
        return [p.one_line() for p in self.problems]

    def to_json(self) -> dict[str, JSON]:
        return {
            "ok": self.ok,
            "tasks": self.tasks,
            "errors": len(self.errors),
            "problems": [p.to_json() for p in self.problems],
            "checked": dict(sorted(self.checked.items())),
            "compared_with": self.sources,
        }
