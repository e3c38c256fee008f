"""What the brief says besides the state: the contract then and now, the prose rules,
the budget, why the last session stopped, and the agent's own last work.

- Constraints are only ever added. A constraint in the contract now is in force;
  one that was in the contract of the starting checkpoint and has been removed
  since is reported as removed *and still listed* (state updates never drop a
  constraint, design section 3); an id in the task state with no text anywhere
  is listed by id.
- The prose of `.agent/contracts/constraints.md` is carried verbatim, never
  trimmed, like the checked constraints.
- Usage is cumulative across resumes; the budget left is budget minus used.
- Why the last session stopped: the last event that says so (a quota or rate
  limit, an error), when there is one.
- Recent work: the agent's own events (tool and model calls, file writes,
  prompts), not the tool's bookkeeping (`checkpoint.*`, `recovery.*`, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from git_agentckpt.contracts.schema import (
    CONTRACT_FILENAMES,
    Contract,
    ContractError,
    load_contract_text,
)
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON, Event, is_tool_only
from git_agentckpt.settings import CONSTRAINTS_MD, CONTRACTS_DIR

PROSE_FILE = f"{CONTRACTS_DIR}/constraints.md"


@dataclass
class ContractContext:
    now: Contract | None
    at_start: Contract | None
    prose: str | None  # constraints.md now, verbatim (None: absent or the untouched template)
    prose_at_start: str | None  # when it differs from now
    start_unreadable: str | None = None  # why the checkpoint's contract could not be read

    @property
    def added(self) -> list[str]:
        then = {c.id for c in self.at_start.constraints} if self.at_start else set()
        return [c.id for c in self.now.constraints if c.id not in then] if self.now else []

    @property
    def removed(self) -> list[str]:
        now = {c.id for c in self.now.constraints} if self.now else set()
        return [c.id for c in self.at_start.constraints if c.id not in now] if self.at_start else []

    def constraints_in_force(self, state: Mapping[str, JSON]) -> list[dict[str, JSON]]:
        """Every constraint in force: the contract's now, those removed since the start
        (still in force), and the task state's ids without text. Never trimmed."""
        out: list[dict[str, JSON]] = []
        seen: set[str] = set()
        removed = set(self.removed)
        sources = [(c, "contract") for c in (self.now.constraints if self.now else ())]
        sources += [
            (c, "removed from the contract since the starting checkpoint: still in force")
            for c in (self.at_start.constraints if self.at_start else ())
            if c.id in removed
        ]
        for c, source in sources:
            out.append(
                {
                    "id": c.id,
                    "text": c.text,
                    "severity": c.severity,
                    "checked": c.check is not None,
                    "source": source,
                }
            )
            seen.add(c.id)
        for cid in state.get("constraints") or []:
            if isinstance(cid, str) and cid not in seen:
                out.append(
                    {
                        "id": cid,
                        "text": cid,
                        "severity": "block",
                        "checked": False,
                        "source": "task state (no text in .agent/contracts)",
                    }
                )
                seen.add(cid)
        return out

    def to_json(self) -> dict[str, JSON]:
        return {
            "added_since_start": self.added,
            "removed_since_start": self.removed,
            "prose": self.prose,
            "prose_changed_since_start": self.prose_at_start is not None,
            "start_contract_unreadable": self.start_unreadable,
        }


def _read_prose(text: str | None) -> str | None:
    if text is None or text.strip() == CONSTRAINTS_MD.strip():
        return None
    return text


def _tree_text(repo: GitRepo, tree: str, path: str) -> str | None:
    entry = repo.tree_entry(tree, path)
    if entry is None or entry[1] not in (0o100644, 0o100755):
        return None
    return repo.read_blob(entry[0]).decode("utf-8", "replace")


def contract_context(
    repo: GitRepo, now: Contract | None, start_tree: str | None
) -> ContractContext:
    """The contract now and in the starting checkpoint's tree, and the prose rules. With
    no starting checkpoint (None) nothing was added or removed since: there is no since."""
    at_start: Contract | None = now if start_tree is None else None
    unreadable = None
    for name in CONTRACT_FILENAMES:
        if start_tree is None:
            break
        text = _tree_text(repo, start_tree, f"{CONTRACTS_DIR}/{name}")
        if text is not None:
            try:
                at_start = load_contract_text(text, f"{CONTRACTS_DIR}/{name} (at the start)")
            except ContractError as exc:
                unreadable = exc.one_line()
            break
    try:
        with open(os.path.join(repo.workdir, PROSE_FILE), encoding="utf-8") as fh:
            prose_now: str | None = fh.read()
    except (OSError, UnicodeDecodeError):
        prose_now = None
    prose_start = prose_now if start_tree is None else _tree_text(repo, start_tree, PROSE_FILE)
    return ContractContext(
        now=now,
        at_start=at_start,
        prose=_read_prose(prose_now),
        prose_at_start=_read_prose(prose_start) if prose_start != prose_now else None,
        start_unreadable=unreadable,
    )


@dataclass
class Budget:
    usage: dict[str, JSON]
    last_stop: str | None = None  # the last event saying why a session stopped
    left: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        return {"usage": self.usage, "left": self.left, "last_stop": self.last_stop}


def budget(usage: Mapping[str, JSON], stop: Event | None) -> Budget:
    """Usage so far, what is left of each budget, and the last stop signal in the log
    (`stop`: the event index keeps where it is, store/log_index.py)."""
    used = dict(usage)
    left: dict[str, JSON] = {}
    for spent, limit in (("tokens_used", "token_budget"), ("calls_used", "calls_budget")):
        u, b = used.get(spent), used.get(limit)
        if isinstance(u, int | float) and isinstance(b, int | float):
            left[spent.replace("_used", "_left")] = b - u
    line = None
    if stop is not None:
        what = stop.data.get("error") or stop.data.get("message") or stop.output or ""
        shown = what if isinstance(what, str) else json.dumps(what, sort_keys=True)
        line = f"#{stop.seq} {stop.type} at {stop.ts}" + (f": {shown[:200]}" if shown else "")
    return Budget(used, line, left)


def work_events(events: Sequence[Event], n: int) -> list[str]:
    """The agent's own last `n` events (tool and model calls with what went in and out)."""
    mine = [ev for ev in events if not is_tool_only(ev.type)]
    return [_event_line(ev) for ev in mine[-n:]] if n > 0 else []


def _event_line(ev: Event) -> str:
    bits = [f"#{ev.seq}", ev.type]
    for key in ("step", "checkpoint"):
        value = ev.links.get(key)
        if isinstance(value, str):
            bits.append(f"{key}={value[:12]}")
    for label, value in (("in", ev.input), ("out", ev.output)):
        if value is not None:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            bits.append(f"{label}: {text[:160]}")
    return " ".join(bits)


def constraints_for_state(
    repo: GitRepo, contract: Contract | None, state: Mapping[str, JSON]
) -> list[dict[str, JSON]]:
    """The constraints in force for a recovering task: its contract now and at the
    checkpoint it resumed from (`state.recovery.from`), and its state's ids."""
    recovery = state.get("recovery")
    start = recovery.get("from") if isinstance(recovery, dict) else None
    tree = repo.read_commit(start).tree if isinstance(start, str) else None
    return contract_context(repo, contract, tree).constraints_in_force(state)
