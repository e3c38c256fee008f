"""Resume step 4: the recovery brief, a short structured context for the agent.

It holds the goal, the done steps with their outputs, the current and next
step, every constraint in force verbatim, the last events, what verification
and assertions found, the environment record and the command to confirm.
Under `--max-brief-tokens`, events go first, then step outputs, then the
environment; constraints and the current step are never cut. The free-text
summary is shown as non-authoritative and is never the source of a fact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from git_agentckpt.contracts.schema import Contract
from git_agentckpt.model import JSON, Event
from git_agentckpt.recovery.restatement import form_markdown, render_form

DONE = ("done", "skipped")


def estimate_tokens(text: str) -> int:
    """About four characters a token: a deliberate, documented over-estimate for prose."""
    return (len(text) + 3) // 4


def next_step(state: dict[str, JSON]) -> str | None:
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    current = state.get("current_step")
    for s in steps:
        if s.get("id") == current and s.get("status") not in DONE:
            return str(current)
    for s in steps:
        if s.get("status") in ("in_progress", "pending", "failed"):
            return str(s["id"])
    return None


def constraints_in_force(
    state: dict[str, JSON], contract: Contract | None
) -> list[dict[str, JSON]]:
    out: list[dict[str, JSON]] = []
    seen: set[str] = set()
    for c in contract.constraints if contract else ():
        out.append(
            {
                "id": c.id,
                "text": c.text,
                "severity": c.severity,
                "checked": c.check is not None,
                "source": "contract",
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


def _event_line(ev: Event) -> str:
    bits = [f"#{ev.seq}", ev.type]
    for key in ("step", "checkpoint"):
        value = ev.links.get(key)
        if isinstance(value, str):
            bits.append(f"{key}={value[:12]}")
    for label, value in (("in", ev.input), ("out", ev.output)):
        if value is not None:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            bits.append(f"{label}: {text[:80]}")
    return " ".join(bits)


@dataclass
class Brief:
    data: dict[str, JSON]
    markdown: str
    tokens: int
    trimmed: list[str] = field(default_factory=list)

    def render(self, fmt: str) -> str:
        return self.markdown if fmt == "md" else json.dumps(self.data, indent=2, sort_keys=True)


def _render(d: dict[str, JSON]) -> str:
    lines = [f"# Recovery brief: {d['task']}", "", f"**Goal:** {d['goal']}", ""]
    lines.append(f"**Current step:** {d['current_step'] or 'none'}  ")
    lines.append(f"**Next step:** {d['next_step'] or 'none'}")
    lines += ["", "## Constraints in force (verbatim, never trimmed)"]
    constraints = d["constraints"]
    assert isinstance(constraints, list)
    if not constraints:
        lines.append("- (none)")
    for c in constraints:
        assert isinstance(c, dict)
        lines.append(f"- [{c['id']}] ({c['severity']}) {c['text']}")
    lines += ["", "## Steps"]
    steps = d["steps"]
    assert isinstance(steps, list)
    for s in steps:
        assert isinstance(s, dict)
        line = f"- {s['id']} [{s['status']}]: {s['title']}"
        if s.get("status") == "done":
            line += " (done: do not redo)"
        if s.get("outputs") is not None:
            line += f" -> outputs: {json.dumps(s['outputs'], sort_keys=True)}"
        lines.append(line)
    found = d["found"]
    assert isinstance(found, dict)
    lines += ["", "## What the resume found"]
    for key, value in found.items():
        lines.append(f"- {key}: {json.dumps(value, sort_keys=True)}")
    events = d["recent_events"]
    assert isinstance(events, list)
    if events:
        lines += ["", "## Recent events"]
        lines += [f"- {e}" for e in events]
    if d.get("env"):
        lines += ["", "## Environment", f"{json.dumps(d['env'], sort_keys=True)}"]
    summary = d.get("summary")
    if summary:
        lines += [
            "",
            "## Summary (free text, NOT authoritative: do not use it as a source of facts)",
            str(summary),
        ]
    lines += [
        "",
        "## To continue",
        "Restate the goal, every constraint (by id) and the next step, then run:",
        f"`{d['confirm_command']}`",
    ]
    lines += form_markdown(d)  # the brief ends with the restatement form (issue 10 item 4)
    return "\n".join(lines) + "\n"


def build_brief(
    state: dict[str, JSON],
    contract: Contract | None,
    events: Sequence[Event],
    found: dict[str, JSON],
    *,
    max_tokens: int | None = None,
    n_events: int = 10,
) -> Brief:
    steps = [dict(s) for s in state.get("steps") or [] if isinstance(s, dict)]
    summary = state.get("summary")
    summary_text = summary.get("text") if isinstance(summary, dict) else None
    task = str(state.get("task"))
    data: dict[str, JSON] = {
        "v": 1,
        "task": task,
        "goal": state.get("goal", ""),
        "status": state.get("status"),
        "current_step": state.get("current_step"),
        "next_step": next_step(state),
        "constraints": constraints_in_force(state, contract),
        "steps": [
            {
                "id": s["id"],
                "title": s.get("title"),
                "status": s.get("status"),
                "outputs": s.get("outputs"),
            }
            for s in steps
        ],
        "found": found,
        "recent_events": [_event_line(e) for e in list(events)[-n_events:]],
        "env": state.get("env") or {},
        "summary": summary_text or None,
        "summary_authoritative": False,
        "confirm_command": f"git ckpt confirm {task} --restatement FILE",
    }
    data["restatement_form"] = render_form(data["constraints"])
    trimmed: list[str] = []
    markdown = _render(data)
    if max_tokens is not None:
        cuts: list[tuple[str, Callable[[dict[str, JSON]], bool]]] = [
            ("events", _cut_events),
            ("summary", lambda d: _drop(d, "summary", None)),
            ("outputs", _cut_outputs),
            ("environment", lambda d: _drop(d, "env", {})),
            ("found details", _cut_found),
        ]
        for name, cut in cuts:
            while estimate_tokens(markdown) > max_tokens:
                if not cut(data):
                    break
                if name not in trimmed:
                    trimmed.append(name)
                markdown = _render(data)
        data["trimmed"] = list(trimmed)
        data["over_budget"] = estimate_tokens(markdown) > max_tokens
        markdown = _render(data)
    return Brief(data, markdown, estimate_tokens(markdown), trimmed)


def _drop(d: dict[str, JSON], key: str, empty: JSON) -> bool:
    if not d.get(key):
        return False
    d[key] = empty
    return True


def _cut_events(d: dict[str, JSON]) -> bool:
    events = d["recent_events"]
    assert isinstance(events, list)
    if not events:
        return False
    d["recent_events"] = events[len(events) // 2 + 1 :] if len(events) > 1 else []
    return True


def _cut_outputs(d: dict[str, JSON]) -> bool:
    steps = d["steps"]
    assert isinstance(steps, list)
    for s in steps:
        assert isinstance(s, dict)
        if s.get("outputs") is not None:
            s["outputs"] = None
            return True
    return False


def _cut_found(d: dict[str, JSON]) -> bool:
    found = d["found"]
    assert isinstance(found, dict)
    for key, value in found.items():
        if isinstance(value, list) and value:
            found[key] = f"{len(value)} item(s), listed in the recovery report"
            return True
        if isinstance(value, dict) and value:
            found[key] = "see the recovery report"
            return True
    return False
