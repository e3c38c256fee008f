"""The restatement form that ends every recovery brief, and reading a filled-in one (pure).

The agent copies the form, replaces each `<...>` with its own words and
passes it to `git ckpt confirm TASK --restatement FILE`. A constraint with a check
carries the value its check verifies (`recovery/checked.py`), kept when the placeholder
is replaced and compared exactly::

    Goal: <the goal, in your own words>
    Constraints (one line per id, in your own words):
    - seed42: train.seed = 42 — <this constraint, in your own words>
    - api-frozen: unchanged: src/api/** — <this constraint, in your own words>
    Done steps (not to be redone): <ids of the done steps, or none>
    Next step: <id of the next step, or none>

`parse_form` finds those lines in a restatement: the goal line, one or more
lines per constraint id (`- <id>: ...`, `<id>: ...`, `- [<id>] ...`; several
constraints may share a line when separated by `;`), the done steps (on the
line, or as `- <step>` lines under it) and any placeholder left unfilled.
A restatement without any `- <id>:` line (nor, when no constraint is in force,
a "Done steps" line) is free text: `None`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from git_agentckpt.model import JSON
from git_agentckpt.recovery.checked import carried

GOAL = "<the goal, in your own words>"
CONSTRAINT = "<this constraint, in your own words>"
DONE = "<ids of the done steps, or none>"
NEXT = "<id of the next step, or none>"
PLACEHOLDERS = (GOAL, CONSTRAINT, DONE, NEXT)

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])?\s*")
_GOAL = re.compile(r"^\s*(?:[-*+•]\s*)?\**goal\b[^:\n]*:\**\s*(.*)$", re.I)
_DONE = re.compile(r"^\s*(?:[-*+•]\s*)?\**done(?:\s+steps?)?\b[^:\n]*:\**\s*(.*)$", re.I)
_NEXT = re.compile(r"^\s*(?:[-*+•]\s*)?\**next\s+step\b", re.I)
_STEP_TOKEN = re.compile(r"[A-Za-z0-9_.-]+")
_EMPTY = frozenset(("", "-", "n/a", "na", "none", "tbd", "todo", "?", "...", "…", "ok", "yes"))


def render_form(
    constraints: Sequence[Mapping[str, JSON]],
    checks: Mapping[str, Mapping[str, object]] | None = None,
) -> str:
    """The form to fill in: goal, one line per constraint id (with the value its check
    verifies, `checks`: id -> check object), done steps, next step."""
    lines = [f"Goal: {GOAL}", "Constraints (one line per id, in your own words):"]
    for c in constraints:
        value = carried((checks or {}).get(str(c.get("id"))))
        lines.append(f"- {c.get('id')}: {value.text + ' — ' if value else ''}{CONSTRAINT}")
    if not constraints:
        lines.append("- (none in force)")
    lines += [f"Done steps (not to be redone): {DONE}", f"Next step: {NEXT}"]
    return "\n".join(lines) + "\n"


def form_markdown(data: Mapping[str, JSON]) -> list[str]:
    """The last section of the Markdown brief: the form, in a block to copy."""
    form = data.get("restatement_form")
    command = data.get("confirm_command")
    return [
        "",
        "## Restatement form (fill in every line, keep the ids)",
        "Replace each `<...>` with your own words, save it to FILE and run "
        f"`{command}`. Every constraint keeps its line, and a checked value before "
        "the `—` stays as printed; a line that drops, negates, contradicts or weakens its "
        "constraint (an exception, a condition, a permission, another value), or a plan to "
        "redo a done step, is refused.",
        "",
        "```text",
        str(form).rstrip("\n"),
        "```",
    ]


@dataclass
class FilledForm:
    goal: str | None = None
    constraints: dict[str, list[str]] = field(default_factory=dict)  # id -> its lines' text
    done: list[str] | None = None  # step ids on the "Done steps" line(s); None: no such line
    done_text: str = ""
    next_line: bool = False
    unfilled: list[str] = field(default_factory=list)  # lines still holding a placeholder


def _keyed(segment: str, ids: Sequence[str]) -> tuple[str, str] | None:
    """`- seed42: text` -> (seed42, text) when the segment starts with a known id."""
    body = _BULLET.sub("", segment, count=1).lstrip("*`[ ")
    low = body.lower()
    for cid in sorted(ids, key=len, reverse=True):
        if not low.startswith(cid.lower()):
            continue
        rest = body[len(cid) :]
        m = re.match(r"^[`*\]]*\s*(?:[:=—–]|-\s|\s-\s)\s*(.*)$", rest)
        if m is None and rest.startswith("]"):
            m = re.match(r"^\]\s*(.*)$", rest)
        if m is not None:
            return cid, m.group(1).strip()
    return None


def parse_form(text: str, ids: Sequence[str], steps: Sequence[str]) -> FilledForm | None:
    form = FilledForm()
    step_ids = {s.lower(): s for s in steps}
    lines = text.splitlines()
    in_done = False
    for n, line in enumerate(lines, 1):
        if any(p in line for p in PLACEHOLDERS):
            form.unfilled.append(f"line {n}: {line.strip()[:80]}")
        m = _GOAL.match(line)
        if m and form.goal is None:
            form.goal = m.group(1).strip()
            in_done = False
            continue
        m = _DONE.match(line)
        if m:
            form.done = _step_ids(m.group(1), step_ids)
            form.done_text = m.group(1).strip()
            in_done = not form.done
            continue
        if _NEXT.match(line):
            form.next_line = True
            in_done = False
            continue
        if in_done:
            found = _step_ids(_BULLET.sub("", line, count=1).split(":")[0], step_ids)
            if found and form.done is not None:
                form.done += found
                continue
            in_done = False
        # `- seed42: ...; api-frozen: ...`: more segments only after a first one; a
        # segment without an id goes on with the one before (`- seed42: ...; never 7`)
        current: str | None = None
        for segment in line.split(";"):
            keyed = _keyed(segment, ids)
            if keyed is not None:
                current = keyed[0]
                form.constraints.setdefault(current, []).append(keyed[1])
            elif current is None:
                break
            else:
                form.constraints[current][-1] += ";" + segment
    if form.constraints or (not ids and form.done is not None):
        return form
    return None


def _step_ids(text: str, step_ids: Mapping[str, str]) -> list[str]:
    return [step_ids[t.lower()] for t in _STEP_TOKEN.findall(text) if t.lower() in step_ids]


def is_empty(restated: str) -> bool:
    """A constraint line that restates nothing: blank, "n/a", "ok", a placeholder."""
    text = restated.strip().strip("`*<>").strip()
    return text.lower() in _EMPTY or restated.strip() in PLACEHOLDERS
