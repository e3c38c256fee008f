"""Resume step 4: the recovery brief, built from the records of steps 1-3.

It states the goal; every constraint in force and the prose rules of
`constraints.md`, verbatim (never trimmed: a constraint removed from the
contract since the checkpoint is still listed, as removed); the steps with the
outputs of the done ones; the next step (never a step whose step-end
checkpoint is committed); what recovery did, file by file, and why (restore,
accepted drift, rollback, regenerable output, files it never touches), with
the safety checkpoint that undoes it; failing assertions and constraints;
state it did not trust; the budget used and left and why the last session
stopped; the agent's own last work. Under `--max-brief-tokens`, the last work
goes first, then the summary, step outputs, the environment and the file
lists (counted, and named in the report). The free-text summary is shown as
non-authoritative and is never the source of a fact.

A brief of the recorded state (`--brief-only`) of a task that waits for its
recovery says so where it tells what to do next (`waiting`): a recovering task (and a
not-ready one whose block constraints failed) waits for the agent's restatement, and
its brief ends with the form and the confirm command, as the resume's did; a
not-ready one whose files drifted (or whose assertions failed) waits for a person, and
its brief says not to continue the steps and which two commands decide.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from git_agentckpt.contracts.schema import check_to_json
from git_agentckpt.lifecycle import CONSTRAINTS, PAUSED, blocked_by, not_ready
from git_agentckpt.model import JSON
from git_agentckpt.paths import json_safe, quote
from git_agentckpt.recovery.assertions import AssertionStep
from git_agentckpt.recovery.context import Budget, ContractContext
from git_agentckpt.recovery.locate import Located
from git_agentckpt.recovery.restatement import form_markdown, render_form
from git_agentckpt.recovery.verify import VerifyStep

DONE = ("done", "skipped")


def estimate_tokens(text: str) -> int:
    """About four characters a token: a deliberate, documented over-estimate for prose."""
    return (len(text) + 3) // 4


def next_step(state: dict[str, JSON]) -> str | None:
    """The current step if it is open, else the first open one; never a done step."""
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    current = state.get("current_step")
    for s in steps:
        if s.get("id") == current and s.get("status") not in DONE:
            return str(current)
    for s in steps:
        if s.get("status") in ("in_progress", "pending", "failed"):
            return str(s["id"])
    return None


@dataclass
class Facts:
    """Everything the brief states, as the resume steps recorded it."""

    state: dict[str, JSON]  # the state the task continues from
    contract: ContractContext
    budget: Budget
    mode: str  # ready | finished | brief only
    work: list[str] = field(default_factory=list)  # the agent's last events, one line each
    located: Located | None = None
    verified: VerifyStep | None = None
    asserted: AssertionStep | None = None
    constraints_failing: list[dict[str, JSON]] = field(default_factory=list)
    steps_reset: list[str] = field(default_factory=list)
    not_trusted: list[str] = field(default_factory=list)  # suspect claims, skipped events
    redo_attempts: list[str] = field(default_factory=list)  # starts of done steps


@dataclass
class Brief:
    data: dict[str, JSON]
    markdown: str
    tokens: int
    trimmed: list[str] = field(default_factory=list)

    def render(self, fmt: str) -> str:
        if fmt == "md":
            return self.markdown
        return json.dumps(json_safe(self.data), indent=2, sort_keys=True)


def _recovery_did(f: Facts) -> dict[str, JSON]:
    did: dict[str, JSON] = {}
    if f.located is not None and f.located.start is not None:
        did["start"] = {"id": f.located.start.id, "why": f.located.reason}
    files: list[JSON] = []
    if f.verified is not None:
        did["decision"] = f.verified.decision
        files += [a.to_json() for a in f.verified.files]
        if f.verified.safety is not None:
            did["safety_checkpoint"] = f.verified.safety.id
        still = f.verified.final
        if still.to_regenerate:
            did["to_regenerate"] = list(still.to_regenerate)
    a = f.asserted
    if a is not None:
        did["assertions"] = f"{len(a.run.results)} checked, {len(a.failed)} failing"
        did["failed_inputs"] = [x.one_line() for x in a.failed]
        did["accepted_inputs"] = [x.one_line() for x in a.accepted]
        if a.rollback is not None and a.rollback.target is not None:
            did["rolled_back_to"] = a.rollback.target.id
            files += [x.to_json() for x in a.rollback.files]
            if a.rollback.safety is not None:
                did["rollback_safety_checkpoint"] = a.rollback.safety.id
    did["files"] = files
    did["steps_reset_to_pending"] = list(f.steps_reset)
    did["constraints_failing"] = list(f.constraints_failing)
    did["not_trusted"] = list(f.not_trusted)
    did["suspected_drift"] = list(f.redo_attempts)
    return {k: v for k, v in did.items() if v not in (None, [], {})}


def waiting(state: dict[str, JSON]) -> dict[str, JSON] | None:
    """What a task that waits for its recovery waits for (None: it does not wait):
    `needs` is `restatement` (the agent restates and confirms) or `person` (a person
    decides with `resume --restore` or `--accept-drift`)."""
    status = state.get("status")
    if status not in PAUSED:
        return None
    task = str(state.get("task"))
    recovery = state.get("recovery")
    report = recovery.get("report") if isinstance(recovery, dict) else None
    out: dict[str, JSON] = {"task": task, "status": status, "report": report}
    if status == "recovering":
        out.update(
            needs="restatement",
            why=f"task {task} is recovering: its resume waits for the agent's restatement",
            to_do=f"restate, then `git ckpt confirm {task} --restatement FILE`",
        )
        return out
    refusal = not_ready(task, state)
    reason = blocked_by(state)
    out.update(
        blocked=reason,
        needs="restatement" if reason == CONSTRAINTS else "person",
        why=refusal.message,
        to_do=refusal.hint,
    )
    return out


def build_brief(f: Facts, *, max_tokens: int | None = None) -> Brief:
    state = f.state
    steps = [dict(s) for s in state.get("steps") or [] if isinstance(s, dict)]
    summary = state.get("summary")
    summary_text = summary.get("text") if isinstance(summary, dict) else None
    task = str(state.get("task"))
    waits = waiting(state) if f.mode == "brief only" else None
    confirm = f.mode == "ready" or (waits is not None and waits["needs"] == "restatement")
    data: dict[str, JSON] = {
        "v": 1,
        "task": task,
        "mode": f.mode,
        "goal": state.get("goal", ""),
        "status": state.get("status"),
        "current_step": state.get("current_step"),
        "next_step": next_step(state),
        "constraints": f.contract.constraints_in_force(state),
        "constraints_added_since_start": f.contract.added,
        "constraints_removed_since_start": f.contract.removed,
        "prose_rules": f.contract.prose,
        "steps": [
            {
                "id": s["id"],
                "title": s.get("title"),
                "status": s.get("status"),
                "outputs": s.get("outputs"),
            }
            for s in steps
        ],
        "recovery": _recovery_did(f),
        "budget": f.budget.to_json(),
        "recent_work": list(f.work),
        "env": state.get("env") or {},
        "summary": summary_text or None,
        "summary_authoritative": False,
        "confirm_command": f"git ckpt confirm {task} --restatement FILE" if confirm else None,
        "waiting": waits,
    }
    if confirm:  # the brief ends with the form to fill in (never trimmed)
        checks: dict[str, dict[str, object] | None] = {}
        for contract in (f.contract.at_start, f.contract.now):  # the contract now wins
            for c in contract.constraints if contract is not None else ():
                checks[c.id] = check_to_json(c.check) if c.check is not None else None
        carried = {cid: check for cid, check in checks.items() if check is not None}
        data["restatement_form"] = render_form(_constraint_dicts(data["constraints"]), carried)
    trimmed: list[str] = []
    markdown = render_markdown(data)
    if max_tokens is not None:
        cuts: list[tuple[str, Callable[[dict[str, JSON]], bool]]] = [
            ("recent work", _cut_work),
            ("summary", lambda d: _drop(d, "summary", None)),
            ("outputs", _cut_outputs),
            ("environment", lambda d: _drop(d, "env", {})),
            ("file lists", _cut_files),
        ]
        for name, cut in cuts:
            while estimate_tokens(markdown) > max_tokens and cut(data):
                if name not in trimmed:
                    trimmed.append(name)
                markdown = render_markdown(data)
        data["trimmed"] = list(trimmed)
        data["over_budget"] = estimate_tokens(markdown) > max_tokens
        markdown = render_markdown(data)
    return Brief(data, markdown, estimate_tokens(markdown), trimmed)


def _constraint_dicts(value: JSON) -> list[dict[str, JSON]]:
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


# -- Markdown -------------------------------------------------------------------------


def _list(value: JSON) -> list[JSON]:
    return value if isinstance(value, list) else []


def _constraint_lines(d: dict[str, JSON]) -> list[str]:
    lines = ["", "## Constraints in force (verbatim, never trimmed)"]
    constraints = _list(d["constraints"])
    if not constraints:
        lines.append("- (none)")
    for c in constraints:
        assert isinstance(c, dict)
        line = f"- [{c['id']}] ({c['severity']}) {c['text']}"
        if str(c.get("source", "")).startswith("removed"):
            line += f"  _({c['source']})_"
        lines.append(line)
    added = _list(d.get("constraints_added_since_start"))
    if added:
        lines.append(
            f"- (added to the contract since the starting checkpoint: {', '.join(map(str, added))})"
        )
    if d.get("prose_rules"):
        prose = str(d["prose_rules"]).rstrip("\n")
        fence = "~~~~" if "~~~" in prose else "~~~"  # verbatim: a fence the text cannot close
        lines += ["", "## Rules in .agent/contracts/constraints.md (verbatim, never trimmed)", ""]
        lines += [fence + "markdown", prose, fence]
    return lines


def _step_lines(d: dict[str, JSON]) -> list[str]:
    lines = ["", "## Steps"]
    for s in _list(d["steps"]):
        assert isinstance(s, dict)
        line = f"- {s['id']} [{s['status']}]: {s['title']}"
        if s.get("status") == "done":
            line += " (done: do not redo)"
        if s.get("outputs") is not None:
            line += f" -> outputs: {json.dumps(s['outputs'], sort_keys=True)}"
        lines.append(line)
    return lines


_LABELS = {
    "start": "started from",
    "decision": "decision",
    "safety_checkpoint": "safety checkpoint (undoes the restore: `git ckpt restore ID`)",
    "to_regenerate": "to regenerate",
    "assertions": "assertions",
    "failed_inputs": "failing assertions",
    "accepted_inputs": (
        "accepted by a person (re-pinned; redo the steps named if the new value matters)"
    ),
    "rolled_back_to": "rolled back to checkpoint",
    "rollback_safety_checkpoint": "safety checkpoint (undoes the rollback)",
    "steps_reset_to_pending": "steps reset to pending (redo them)",
    "constraints_failing": "constraints failing now",
    "not_trusted": "not trusted (the history does not back it)",
    "suspected_drift": "suspected drift",
}


def _recovery_lines(d: dict[str, JSON]) -> list[str]:
    did = d["recovery"]
    assert isinstance(did, dict)
    if not did:
        return []
    lines = ["", "## What recovery did"]
    for key, value in did.items():
        if key == "files":
            if isinstance(value, str):
                lines.append(f"- files: {value}")
                continue
            lines.append("- files, one by one:" if value else "- files: none changed")
            for item in _list(value):
                assert isinstance(item, dict)
                path = quote(str(item["path"]))  # git's quoting: one line, valid UTF-8
                lines.append(f"  - `{path}`: {item['action']} ({item['why']})")
        elif key == "start" and isinstance(value, dict):
            lines.append(f"- started from checkpoint {value['id']}: {value['why']}")
        elif key == "constraints_failing":
            lines.append(f"- {_LABELS[key]}:")
            for c in _list(value):
                assert isinstance(c, dict)
                lines.append(f"  - [{c.get('id')}] ({c.get('severity')}) {c.get('detail')}")
        elif key == "to_regenerate" and isinstance(value, list):
            lines.append(f"- {_LABELS[key]}:")
            lines += [f"  - {quote(str(v))}" for v in value]
        elif isinstance(value, list):
            lines.append(f"- {_LABELS.get(key, key)}:")
            lines += [f"  - {v}" for v in value]
        else:
            lines.append(f"- {_LABELS.get(key, key)}: {value}")
    return lines


def _budget_lines(d: dict[str, JSON]) -> list[str]:
    b = d["budget"]
    assert isinstance(b, dict)
    usage, left = b.get("usage") or {}, b.get("left") or {}
    assert isinstance(usage, dict) and isinstance(left, dict)
    lines = ["", "## Budget"]
    for spent, limit, rest in (
        ("tokens_used", "token_budget", "tokens_left"),
        ("calls_used", "calls_budget", "calls_left"),
    ):
        if spent in usage or limit in usage:
            of = f" of {usage[limit]} ({left.get(rest)} left)" if limit in usage else ""
            lines.append(f"- {spent.replace('_', ' ')}: {usage.get(spent, 0)}{of}")
    if len(lines) == 2:
        lines.append("- no usage recorded")
    stop = b.get("last_stop")
    lines.append(
        f"- the last session stopped: {stop}"
        if stop
        else "- no quota, rate-limit or error event logged"
    )
    return lines


def render_markdown(d: dict[str, JSON]) -> str:
    lines = [f"# Recovery brief: {d['task']}", "", f"**Goal:** {d['goal']}", ""]
    if d["mode"] == "finished":
        lines.append("**The task is finished: every step is done. Next step: none.**")
    lines.append(f"**Current step:** {d['current_step'] or 'none'}  ")
    lines.append(f"**Next step:** {d['next_step'] or 'none'}")
    lines += _constraint_lines(d)
    lines += _step_lines(d)
    lines += _recovery_lines(d)
    lines += _budget_lines(d)
    work = _list(d["recent_work"])
    if work:
        lines += ["", "## Your last work (oldest first)"]
        lines += [f"- {e}" for e in work]
    if d.get("env"):
        lines += ["", "## Environment", f"{json.dumps(d['env'], sort_keys=True)}"]
    if d.get("summary"):
        lines += [
            "",
            "## Summary (free text, NOT authoritative: do not use it as a source of facts)",
            str(d["summary"]),
        ]
    lines += ["", "## To continue"]
    waits = d.get("waiting")
    if isinstance(waits, dict):
        lines += _waiting_lines(waits)
    if d["confirm_command"]:
        lines.append("Restate the goal, every constraint (by id) and the next step, then run:")
        lines.append(f"`{d['confirm_command']}`")
        if d.get("restatement_form"):
            lines += form_markdown(d)
    elif d["mode"] == "finished":
        lines.append("Nothing to continue: the task is finished (no confirmation needed).")
    elif not isinstance(waits, dict):
        lines.append("This brief changed nothing: run `git ckpt resume` to recover the task.")
    return "\n".join(lines) + "\n"


def _waiting_lines(waits: dict[str, JSON]) -> list[str]:
    """What a task waiting for its recovery waits for, and what to do (brief only)."""
    report = f" (recovery report {waits['report']})" if waits.get("report") else ""
    lines = [f"**{waits['why']}{report}.** No step moves and no checkpoint is taken until then."]
    if waits.get("needs") == "person":
        task = str(waits.get("task"))
        lines.append(
            "Do not continue the task's steps, and do not undo, redo or overwrite the files "
            "that differ yourself. Ask the person to decide: "
            f"`git ckpt resume {task} --restore` (bring the checkpoint's files back) or "
            f"`git ckpt resume {task} --accept-drift` (keep them as they are)."
        )
    elif waits.get("blocked"):
        lines.append(f"What to do: {waits['to_do']}.")
    return lines


# -- trimming under --max-brief-tokens -----------------------------------------------


def _drop(d: dict[str, JSON], key: str, empty: JSON) -> bool:
    if not d.get(key):
        return False
    d[key] = empty
    return True


def _cut_work(d: dict[str, JSON]) -> bool:
    work = _list(d["recent_work"])
    if not work:
        return False
    d["recent_work"] = work[len(work) // 2 + 1 :] if len(work) > 1 else []
    return True


def _cut_outputs(d: dict[str, JSON]) -> bool:
    for s in _list(d["steps"]):
        assert isinstance(s, dict)
        if s.get("outputs") is not None:
            s["outputs"] = None
            return True
    return False


def _cut_files(d: dict[str, JSON]) -> bool:
    did = d["recovery"]
    assert isinstance(did, dict)
    files = did.get("files")
    if isinstance(files, list) and files:
        did["files"] = f"{len(files)} file(s), each named in the recovery report"
        return True
    return False
