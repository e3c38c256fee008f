"""State claims checked against the history that must stand behind them.

A step is done only when its step-end checkpoint is committed (design section
1): a note is a claim, the checkpoint chain is the evidence. A note that says
a step is done while no step-end checkpoint of that step stands behind it (or
a later resume checkpoint reset it and nothing re-did it) was forged, copied
from elsewhere or damaged. Such claims are reported as suspect, and recovery
does not trust them: the step counts as not done.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from git_agentckpt.model import JSON, find_step, normalize_state
from git_agentckpt.store.checkpoints import (
    RESUME_TRIGGER,
    STEP_END_TRIGGER,
    Checkpoint,
    CheckpointStore,
)
from git_agentckpt.store.refs import TaskName


@dataclass(frozen=True)
class SuspectClaim:
    step: str | None  # None: a claim about the task itself
    claim: str
    reason: str

    def to_json(self) -> dict[str, JSON]:
        return {"step": self.step, "claim": self.claim, "reason": self.reason}

    def one_line(self) -> str:
        what = f"step {self.step}" if self.step else "the task"
        return f"{what} is marked {self.claim}, but {self.reason}"


def _done_steps(state: dict[str, JSON]) -> list[str]:
    return [
        str(s["id"])
        for s in state.get("steps") or []
        if isinstance(s, dict) and s.get("status") == "done"
    ]


def unsupported_claims(
    store: CheckpointStore, task: TaskName, state: dict[str, JSON], tip: Checkpoint | None
) -> list[SuspectClaim]:
    """Done steps (and a done task) that the checkpoint chain from `tip` does not back."""
    unresolved = set(_done_steps(state))
    suspects: list[SuspectClaim] = []
    if unresolved and tip is not None:
        for ckpt in store.chain(task, start=tip.commit):
            if ckpt.trigger == STEP_END_TRIGGER and ckpt.step in unresolved:
                unresolved.discard(ckpt.step)
            elif ckpt.trigger == RESUME_TRIGGER:
                note = store.state_note(ckpt.commit) or {}
                for sid in sorted(unresolved):
                    step = find_step(note, sid)
                    if step is None or step.get("status") != "done":
                        unresolved.discard(sid)
                        suspects.append(
                            SuspectClaim(
                                sid,
                                "done",
                                f"resume checkpoint {ckpt.commit[:12]} set it back to "
                                f"{step.get('status') if step else 'missing'} and no "
                                "step-end checkpoint followed",
                            )
                        )
            if not unresolved:
                break
    suspects += [
        SuspectClaim(sid, "done", "no step-end checkpoint of it is in the task's history")
        for sid in sorted(unresolved)
    ]
    demoted = {c.step for c in suspects}
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    all_done = bool(steps) and all(
        s.get("status") in ("done", "skipped") and s.get("id") not in demoted for s in steps
    )
    if state.get("status") == "done" and not all_done:
        suspects.append(SuspectClaim(None, "done", "not every step is done and proven"))
    return suspects


def without_suspect_claims(state: dict[str, JSON], suspects: list[SuspectClaim]) -> dict[str, JSON]:
    """A copy of `state` where suspect done steps are pending again and the task active."""
    if not suspects:
        return state
    out = copy.deepcopy(state)
    for claim in suspects:
        if claim.step is None:
            out["status"] = "active"
            continue
        step = find_step(out, claim.step)
        if step is not None:
            step["status"] = "pending"
            step["outputs"] = None
    if out.get("status") == "done":
        out["status"] = "active"
    return normalize_state(out)
