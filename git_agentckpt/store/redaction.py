"""The redaction gate: everything the store writes to the object store passes here first.

The git layer (`GitRepo.write_blob`, `write_tree`, `commit`, `notes.write_notes`)
stores what it is given; by contract its callers hand it text that went
through a `Redactor` (design section 5). The writers, and what they redact:

- event commits (`EventLog.append`): every field of every event, through
  `redact_event`; the subject line is made from the cleaned events;
- union merges of event logs (`EventLog.union_commit`): the subject, which
  names the remote (a URL may hold a password); the events they copy are the
  other clone's commits, verbatim;
- checkpoint commits and their notes (`CheckpointStore`): the subject's
  message, the `Trigger` trailer, the state note (`redact_state`) and the
  assertions note (`redact_assertions`); the other trailers are ids;
- recovery reports (`recovery/report.py`, `report_files`): report, brief and
  restatement.

Names that become a ref or an identity — task names, step ids, event types,
constraint and assertion ids — are never stored redacted (a redacted id would
no longer name what it named, and a ref name cannot hold a marker): a name the
redactor would change is refused (`check_name`, exit status 2), and the error
shows it redacted.

File contents in snapshots are not redacted: `secret_paths` keeps secret files
out (`git/secret_files.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.redact import Redactor

__all__ = ["check_name", "redact_assertions", "redact_event", "redact_state"]


_PASSED: dict[tuple[str, str], Redactor] = {}  # (what, name) -> the redactor that let it pass


def check_name(r: Redactor, what: str, name: str) -> None:
    """Refuse `name` (a task name, step id, ...) when the redactor would change it."""
    if _PASSED.get((what, name)) is r:  # event types and task names repeat at every append
        return
    shown = r.text(name)
    if shown == name:
        if len(_PASSED) < 4096:
            _PASSED[what, name] = r
    else:
        raise UsageError(
            f"refusing {what} {shown!r}: it looks like a secret, and a {what} is stored "
            "as it is (in ref names, commit trailers and the event log)",
            hint=f"choose another {what}",
        )


def _state_names(state: Mapping[str, JSON]) -> Iterator[tuple[str, str]]:
    """The identities in a task state or state patch."""
    task = state.get("task")
    if isinstance(task, str):
        yield "task name", task
    for step in state.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("id"), str):
            yield "step id", step["id"]
    current = state.get("current_step")
    if isinstance(current, str):
        yield "step id", current
    for cid in state.get("constraints") or []:
        if isinstance(cid, str):
            yield "constraint id", cid


def redact_state(r: Redactor, state: Mapping[str, JSON]) -> JSON:
    """A task state (or patch) redacted, after checking the names it holds."""
    for what, name in _state_names(state):
        check_name(r, what, name)
    return r.value(dict(state))


def redact_assertions(r: Redactor, items: Sequence[JSON]) -> JSON:
    """Assertions (`{"id": ..., "check": {...}}`) redacted, after checking their ids."""
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            check_name(r, "assertion id", item["id"])
    return r.value(list(items))


def _as_dict(value: JSON) -> dict[str, JSON]:
    return value if isinstance(value, dict) else {}


def redact_event(r: Redactor, ev: NewEvent) -> NewEvent:
    """Every field of an event redacted (links too); its type and, for the events that
    carry a state or a patch, the names in it are checked."""
    check_name(r, "event type", ev.type)
    if ev.type in ("task.start", "state.update"):
        for key in ("state", "patch"):
            held = ev.data.get(key)
            if isinstance(held, dict):
                for what, name in _state_names(held):
                    check_name(r, what, name)
    return NewEvent(
        type=ev.type,
        actor=_as_dict(r.value(ev.actor)),
        input=r.value(ev.input),
        output=r.value(ev.output),
        links=_as_dict(r.value(ev.links)),
        data=_as_dict(r.value(ev.data)),
    )
