"""`git ckpt tick`: measure the signals, ask the pure policy, act, and log why.

Signals not given on the command line are derived: the time of the last
(full) checkpoint from the chain, tool and model calls since the last
checkpoint from the event log, the budget share used at the last checkpoint
from its state note, the running snapshot-cost estimate, and a full checkpoint
still owed by an earlier 5% demotion from the last `trigger.decision` event.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON, NewEvent, RunInfo
from git_agentckpt.settings import SETTINGS_PATH
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.costs import read_cost
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import events_since_tip
from git_agentckpt.triggers import Decision, Policy, Signals, decide

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer

CALL_TYPES = ("tool.call", "model.call")


@dataclass(frozen=True)
class TickResult:
    decision: Decision
    signals: Signals
    checkpoint: Checkpoint | None

    def to_json(self) -> dict[str, JSON]:
        return {
            "tier": self.decision.tier,
            "rule": self.decision.rule,
            "decision": self.decision.to_json(),
            "signals": self.signals.to_json(),
            "checkpoint": self.checkpoint.to_json() if self.checkpoint else None,
        }


def load_policy(ck: Checkpointer) -> Policy:
    try:
        return Policy.from_mapping(ck.settings.table("policy"))
    except ValueError as exc:
        raise UsageError(
            f"{SETTINGS_PATH} [policy]: {exc}",
            hint="fix it with `git ckpt config set policy.KEY VALUE`",
        ) from exc


def _share(usage: Any) -> float | None:
    if not isinstance(usage, dict):
        return None
    shares = []
    for used, budget in (("tokens_used", "token_budget"), ("calls_used", "calls_budget")):
        u, b = usage.get(used), usage.get(budget)
        if isinstance(u, int | float) and isinstance(b, int | float) and b > 0:
            shares.append(u / b)
    return max(shares) if shares else None


def _steps_since(ck: Checkpointer, task: TaskName, last_full: Checkpoint | None) -> int:
    """Steps that ended (`step.end`) since the last full checkpoint was prepared."""
    count = 0
    for ev in ck.log.iter_back(task):
        if (
            last_full is not None
            and ev.type == "checkpoint.prepare"
            and (ev.links.get("checkpoint") == last_full.commit)
        ):
            break
        if ev.type == "step.end":
            count += 1
    return count


def derive_signals(ck: Checkpointer, task: TaskName, given: Signals, explicit: set[str]) -> Signals:
    """Fill in what the caller did not give (`explicit` names the fields it gave)."""
    tip = ck.store.tip(task)
    last_full = next((c for c in ck.store.chain(task) if c.kind == "full"), None)
    after = events_since_tip(ck.log, task, tip)
    owed = False
    for ev in reversed(after):
        if ev.type == "trigger.decision":
            owed = bool((ev.data.get("decision") or {}).get("full_pending"))
            break
    else:
        if tip is not None and tip.kind != "full":
            for ev in ck.log.iter_back(task):
                if ev.type == "trigger.decision":
                    owed = bool((ev.data.get("decision") or {}).get("full_pending"))
                    break
    note = ck.store.state_note(tip.commit) if tip else None
    derived: dict[str, Any] = {
        "last_checkpoint_at": float(tip.time) if tip else None,
        "last_full_at": float(last_full.time) if last_full else None,
        "calls_since": sum(1 for ev in after if ev.type in CALL_TYPES),
        "steps_since": _steps_since(ck, task, last_full),
        "usage_at_last_checkpoint": _share(note.get("usage")) if note else None,
        "snapshot_cost_seconds": read_cost(ck.repo),
        "full_pending": owed,
    }
    return replace(given, **{k: v for k, v in derived.items() if k not in explicit})


def tick(ck: Checkpointer, task: str | None, given: Signals, explicit: set[str]) -> TickResult:
    t = ck.resolve_task(task)
    policy = load_policy(ck)
    signals = derive_signals(ck, t, given, explicit)
    decision = decide(signals, policy)
    made: Checkpoint | None = None
    if decision.tier != "none":
        usage: dict[str, JSON] = {
            k: getattr(signals, k)
            for k in ("tokens_used", "token_budget", "calls_used", "calls_budget")
            if getattr(signals, k) is not None
        }
        made = ck.create(
            t.name,
            message=f"tick: {decision.rule}",
            light=decision.tier == "light",
            trigger=decision.rule,
            run=RunInfo(usage=usage),
        )
    links: dict[str, JSON] = {"checkpoint": made.commit} if made else {}
    ck.log.append(
        t,
        [
            NewEvent(
                "trigger.decision",
                links=links,
                data={
                    "signals": signals.to_json(),
                    "decision": decision.to_json(),
                    "policy": policy.to_mapping(),
                },
            )
        ],
    )
    return TickResult(decision, signals, made)
