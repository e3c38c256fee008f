"""The assertions notes a resume acts on: only the ones the checkpoints' prepare events bound.

A checkpoint's `checkpoint.prepare` event names the blob of each note written in the
checkpoint's transaction (`data.notes`: `state`, and `assertions` when it has any). A
note that differs from what its prepare bound — added where the prepare named none
(`git notes add -f`), replaced, or gone — was changed after the fact: resume never
acts on it. It goes on as if the checkpoint had no assertions note, and names the note
in the report and the brief (`ignored`); `git ckpt verify` names it too
(`note-added`, `note-replaced`, `note-missing`). Checkpoints whose prepare binds no
notes (written before the binding existed) keep their note as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from git_agentckpt.git.notes import note_id
from git_agentckpt.model import JSON, Event
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore
from git_agentckpt.store.refs import ASSERTION_NOTES


def prepared_notes(events: Iterable[Event]) -> dict[str, JSON]:
    """{checkpoint commit: the notes its first `checkpoint.prepare` event bound}."""
    out: dict[str, JSON] = {}
    for ev in events:
        target = ev.links.get("checkpoint")
        if ev.type == "checkpoint.prepare" and isinstance(target, str):
            out.setdefault(target, ev.data.get("notes"))
    return out


@dataclass
class BoundNotes:
    store: CheckpointStore
    bound: dict[str, JSON]  # `prepared_notes` of the task's log
    ignored: dict[str, str] = field(default_factory=dict)  # checkpoint commit -> why

    def assertions(self, ckpt: Checkpoint) -> list[JSON]:
        """`ckpt`'s assertions as its prepare event bound them; [] for a note it did not."""
        notes = self.bound.get(ckpt.commit)
        if not isinstance(notes, dict):  # no prepare here, or one older than the binding
            return self.store.assertions_note(ckpt.commit)
        named = notes.get("assertions")
        found = note_id(self.store.repo, ASSERTION_NOTES, ckpt.commit)
        if found == named:
            return self.store.assertions_note(ckpt.commit) if found else []
        if found is None:
            why = f"is gone (its prepare event bound {str(named)[:12]})"
        elif named is None:
            why = f"{found[:12]} was added after the fact (its prepare event bound none)"
        else:
            why = f"{found[:12]} replaced the one its prepare event bound ({str(named)[:12]})"
        self.ignored[ckpt.commit] = (
            f"the assertions note of checkpoint {ckpt.id} {why}: not acted on, resumed as if "
            "the checkpoint had none (tampering? see `git ckpt verify`)"
        )
        return []
