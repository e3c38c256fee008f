"""`git ckpt tick`: measure the signals, ask the pure policy, act, and log why.

Signals not given on the command line are derived: the time of the last
(full) checkpoint from the chain, tool and model calls since the last
checkpoint from the event log, the budget share used at the last checkpoint
from its state note, the running snapshot-cost estimate, and a full checkpoint
still owed by an earlier 5% demotion from the last `trigger.decision` event.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON, NewEvent, RunInfo, find_step
from git_agentckpt.settings import SETTINGS_PATH
from git_agentckpt.store.chain_cache import last_full as last_full_checkpoint
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.costs import read_cost
from git_agentckpt.store.log_index import read_index
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace
from git_agentckpt.triggers import Decision, Policy, Signals, decide


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


def load_policy(ck: Workspace) -> Policy:
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


def _scan(
    ck: Workspace, task: TaskName, tip: Checkpoint | None, last_full: Checkpoint | None
) -> tuple[int, int, bool]:
    """From the log's index of key events (store/log_index.py: no walk of the log).

    Returns the tool/model calls since the tip, the steps ended since the last full
    checkpoint, and whether the newest `trigger.decision` since then still owes a
    full checkpoint (a full checkpoint pays any older debt).
    """
    index = read_index(ck.log, task)
    if index is None:
        return 0, 0, False
    events = index.events

    def newest_prepare(commit: str) -> int | None:
        for i in range(len(events) - 1, -1, -1):
            ev = events[i]
            if ev.type == "checkpoint.prepare" and ev.links.get("checkpoint") == commit:
                return i
        return None

    at_tip = newest_prepare(tip.commit) if tip is not None else None
    at_full = newest_prepare(last_full.commit) if last_full is not None else None
    found = [i for i in (at_tip, at_full) if i is not None]
    calls = index.calls - index.calls_before[max(found)] if found else index.calls
    since_full = events[at_full + 1 :] if at_full is not None else events
    steps = sum(1 for ev in since_full if ev.type == "step.end")
    decision = next((ev for ev in reversed(since_full) if ev.type == "trigger.decision"), None)
    owed = decision is not None and bool((decision.data.get("decision") or {}).get("full_pending"))
    return calls, steps, owed


def derive_signals(ck: Workspace, task: TaskName, given: Signals, explicit: set[str]) -> Signals:
    """Fill in what the caller did not give (`explicit` names the fields it gave)."""
    tip = next(ck.store.chain(task), None)
    # the newest full one, kept per tip (store/chain_cache.py): no walk of the light ones
    full = tip if tip is None or tip.kind == "full" else last_full_checkpoint(ck.store, task)
    calls, steps, owed = _scan(ck, task, tip, full)
    note = ck.store.state_note(tip.commit) if tip else None
    derived: dict[str, Any] = {
        "last_checkpoint_at": float(tip.time) if tip else None,
        "last_full_at": float(full.time) if full else None,
        "calls_since": calls,
        "steps_since": steps,
        "usage_at_last_checkpoint": _share(note.get("usage")) if note else None,
        "snapshot_cost_seconds": read_cost(ck.repo),
        "full_pending": owed,
    }
    return replace(given, **{k: v for k, v in derived.items() if k not in explicit})


def _step_in_progress(ck: Workspace, task: TaskName) -> str | None:
    """The step a checkpoint taken now belongs to: the current step, while it runs."""
    state = ck.state(task)
    current = state.get("current_step")
    step = find_step(state, current) if isinstance(current, str) else None
    if step is not None and step.get("status") == "in_progress":
        return str(current)
    running = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    running = [s for s in running if s.get("status") == "in_progress"]
    return str(running[0]["id"]) if len(running) == 1 else None


def tick(ck: Workspace, task: str | None, given: Signals, explicit: set[str]) -> TickResult:
    t = ck.require_task(task)  # a name nobody started is an error, never a new task
    ck.require_own(t)  # another worktree's task: not this worktree's to checkpoint
    policy = load_policy(ck)
    signals = derive_signals(ck, t, given, explicit)
    decision = decide(signals, policy)
    made: Checkpoint | None = None
    if decision.tier != "none":
        step = _step_in_progress(ck, t)
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
            step=step,
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
