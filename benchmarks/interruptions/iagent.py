"""The scripted agent of the interruption benchmark: one session, run as its own process.

It behaves like a model whose context is a file (`ctx.json`, its "transcript"): the
constraints it knows, the steps it believes done, the step it is in and how many of that
step's actions it has done. It works through the task of `itask.py` and talks to
`git ckpt` the way an agent does, through one of two drivers:

- `cli`: `git-ckpt step start|done`, `event`, `create`, `check`, `resume`, `confirm`;
- `claude-code`: the same step commands (its Bash tool), but everything else is a hook
  call, `git-ckpt hook claude-code EVENT` fed the JSON payload Claude Code sends
  (SessionStart, PostToolUse, PreCompact, Stop, StopFailure, SessionEnd).

It is *forgetful*: a compaction cuts its context to a summary of its progress, and the
constraints go; a restarted session whose transcript could not be continued (`fresh`,
drawn by the driver) starts from nothing at all, and in the Claude Code driver starts as
a new session (SessionStart `startup`, nothing injected), after which the agent runs
`git ckpt resume` itself, as the CLAUDE.md block tells it to. It keeps doing the task,
and where a forgotten constraint mattered it does
what a model without it would (`itask.act`). It learns constraints only from what it is
given: the recovery brief (`- [id] (severity) text` lines) or a refused restatement naming
the constraint. It reads a brief imperfectly: each constraint line is skimmed over with
probability `skim` (seeded), which is what the restatement check is for.

The driver of the benchmark (`bench_interruptions.py`) plans the interruptions; this
process carries them out when it reaches their point: `kill` (prints KILL and waits to be
SIGKILLed with its process group; at point `done` the `step done` call itself dies at a
named crash point first), `quota` (reports the quota cut, exits 75), `compact` (the
context is cut in place, then the session goes on).

Usage (by the driver only): `python iagent.py SPEC.json`.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itask

QUOTA_EXIT = 75
_CONSTRAINT_LINE = re.compile(r"^- \[([A-Za-z0-9_.-]+)\] \((?:block|warn)\) (.+)$", re.M)
_NEXT = re.compile(r"\*\*Next step:\*\* *([A-Za-z0-9_.-]+)")
_CURRENT = re.compile(r"\*\*Current step:\*\* *([A-Za-z0-9_.-]+)")
_DONE_LINE = re.compile(r"^- ([A-Za-z0-9_.-]+) \[done\]", re.M)
_REFUSED_ID = re.compile(r"constraint '([A-Za-z0-9_.-]+)'")
_NOT_LISTED = re.compile(r"done step '([A-Za-z0-9_.-]+)' is not listed")
_NOT_DONE = re.compile(r"step '([A-Za-z0-9_.-]+)' is listed as done, but it is not done")
_EXPECTED_NEXT = re.compile(r"the task's next step is '([A-Za-z0-9_.-]+)'")


@dataclass
class Memory:
    """The agent's context (what a model would have in its window)."""

    known: list[str] = field(default_factory=lambda: list(itask.CONSTRAINT_IDS))
    done: list[str] = field(default_factory=list)
    current: str | None = None
    actions_done: int = 0

    @classmethod
    def load(cls, path: Path) -> Memory:
        if not path.exists():
            return cls()
        return cls(**json.loads(path.read_text()))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__))
        os.replace(tmp, path)


class Agent:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.repo = Path(spec["repo"])
        self.ctx_path = Path(spec["ctx"])
        self.trace_path = Path(spec["trace"])
        self.fired_path = Path(spec["fired"])
        self.hooks = spec["driver"] == "claude-code"
        self.variant: dict[str, Any] = spec["variant"]
        self.session = f"sess-{spec['session']}"
        self.mem = Memory.load(self.ctx_path)
        self.steps = itask.STEPS[: int(spec["steps"])]
        self.reads = 0
        self.tool_uses = 0
        self.env = {**os.environ, "GIT_CKPT_TASK": itask.TASK}

    # -- bookkeeping ------------------------------------------------------------------
    def trace(self, **record: Any) -> None:
        record["session"] = self.spec["session"]
        fd = os.open(self.trace_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def flush(self) -> None:
        self.mem.save(self.ctx_path)

    def ckpt(self, *args: str, stdin: str | None = None, crash: str | None = None) -> Any:
        env = dict(self.env)
        if crash:  # in this process, not a daemon's child: the call itself must die
            env["GIT_CKPT_CRASH_AT"] = crash
            env["GIT_CKPT_SERVER"] = "off"
        return subprocess.run(
            [self.spec["git_ckpt"], *args],
            cwd=self.repo,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
        )

    def hook(self, event: str, **payload: Any) -> dict[str, Any]:
        body = {
            "session_id": self.session,
            "cwd": str(self.repo),
            "hook_event_name": event,
            **payload,
        }
        out = self.ckpt("hook", "claude-code", event, stdin=json.dumps(body))
        try:
            reply = json.loads(out.stdout or "{}")
        except json.JSONDecodeError:
            reply = {}
        if "systemMessage" in reply:
            self.trace(kind="hook_message", event=event, message=reply["systemMessage"])
        return reply if isinstance(reply, dict) else {}

    # -- interruptions ----------------------------------------------------------------
    def planned(self, step: str, point: str) -> dict[str, Any] | None:
        fired = json.loads(self.fired_path.read_text()) if self.fired_path.exists() else []
        for i, item in enumerate(self.spec["plan"]):
            if item["step"] == step and item["point"] == point and i not in fired:
                fired.append(i)
                self.fired_path.write_text(json.dumps(fired))
                self.trace(kind="interrupt", what=item["kind"], step=step, point=point)
                return dict(item)
        return None

    def point(self, step: str, point: str) -> None:
        item = self.planned(step, point)
        if item is None:
            return
        if item["kind"] == "kill":
            self.die()
        elif item["kind"] == "quota":
            self.quota_cut()
        else:
            self.compaction()

    def die(self) -> None:
        print("KILL", flush=True)  # the driver SIGKILLs our whole process group
        time.sleep(600)
        raise SystemExit("not killed")

    def quota_cut(self) -> None:
        if self.hooks:
            self.hook("StopFailure", error="rate_limit", error_message="429 usage limit")
            self.hook("SessionEnd", reason="other")
        else:
            self.ckpt("event", itask.TASK, "--type", "quota", "--json", '{"error": "rate_limit"}')
            self.ckpt("create", "--trigger", "quota", "--force", "-m", "quota cut")
        self.flush()  # a clean exit: the transcript is whole
        raise SystemExit(QUOTA_EXIT)

    def compaction(self) -> None:
        self.mem.known = []  # forgetful: the summary keeps the progress, not the rules
        brief = ""
        if self.hooks:
            self.hook("PreCompact", trigger="auto", custom_instructions=None)
            reply = self.hook("SessionStart", source="compact")
            brief = str(reply.get("hookSpecificOutput", {}).get("additionalContext", ""))
        else:
            self.ckpt("create", "--trigger", "pre_compact", "--force", "-m", "before compaction")
            if self.variant["brief"]:
                out = self.ckpt("resume", itask.TASK, "--brief-only", "--json")
                brief = str(json.loads(out.stdout or "{}").get("brief_markdown", ""))
        if self.variant["brief"] and brief:
            self.read_brief(brief, restart=False)
        self.trace(kind="compacted", known=sorted(self.mem.known))
        self.flush()

    # -- reading what the tool says ---------------------------------------------------
    def read_brief(self, brief: str, *, restart: bool) -> None:
        """Take the constraints, done steps and next step from a brief, skimming."""
        self.reads += 1
        rng = random.Random(f"{self.spec['seed']}/{self.spec['session']}/{self.reads}")
        seen = []
        for ident, _text in _CONSTRAINT_LINE.findall(brief):
            if rng.random() >= self.spec["skim"]:
                seen.append(ident)
        self.mem.known = sorted(set(self.mem.known) | set(seen))
        self.mem.done = [s for s in _DONE_LINE.findall(brief) if s in itask.BY_ID]
        current, nxt = _CURRENT.search(brief), _NEXT.search(brief)
        following = current.group(1) if current and current.group(1) != "none" else None
        following = following or (nxt.group(1) if nxt else None)
        if restart or following != self.mem.current:
            self.mem.current, self.mem.actions_done = None, 0
        self.trace(kind="brief", known=sorted(self.mem.known), next=following)

    def restatement(self) -> str:
        lines = [f"Goal: {itask.GOAL}", "Constraints (one line per id, in your own words):"]
        lines += [f"- {c}: {itask.TEXTS[c]}" for c in self.mem.known]
        lines.append(f"Done steps (not to be redone): {', '.join(self.mem.done) or 'none'}")
        lines.append(f"Next step: {self.next_step() or 'none'}")
        return "\n".join(lines) + "\n"

    def confirm(self) -> None:
        """Restate until the checker accepts (at most 4 tries), learning from refusals."""
        if not self.variant["confirm"]:  # the harness confirms; nobody checks the agent
            form = self.ckpt("resume", itask.TASK, "--brief-only", "--json")
            data = json.loads(form.stdout or "{}").get("brief", {})
            stamped = Memory(
                known=list(itask.CONSTRAINT_IDS),
                done=[s["id"] for s in data.get("steps", []) if s.get("status") == "done"],
            )
            saved, self.mem = self.mem, stamped
            text = self.restatement()
            self.mem = saved
            out = self.ckpt("confirm", itask.TASK, "--restatement", "-", "--json", stdin=text)
            self.trace(kind="confirm", by="harness", tries=1, passed=out.returncode == 0)
            return
        for tries in range(1, 5):
            out = self.ckpt(
                "confirm", itask.TASK, "--restatement", "-", "--json", stdin=self.restatement()
            )
            verdict = json.loads(out.stdout or "{}")
            if out.returncode == 0:
                self.trace(kind="confirm", by="agent", tries=tries, passed=True)
                return
            problems = "\n".join(str(p) for p in verdict.get("problems") or [])
            if not problems:
                self.trace(kind="confirm", by="agent", tries=tries, passed=False, why=out.stderr)
                return
            learned = set(_REFUSED_ID.findall(problems)) & set(itask.CONSTRAINT_IDS)
            self.mem.known = sorted(set(self.mem.known) | learned)
            done = [s for s in self.mem.done if s not in _NOT_DONE.findall(problems)]
            self.mem.done = sorted(set(done) | set(_NOT_LISTED.findall(problems)))
            expected = _EXPECTED_NEXT.search(problems)
            if expected and expected.group(1) != self.mem.current:
                self.mem.current, self.mem.actions_done = None, 0
        self.trace(kind="confirm", by="agent", tries=4, passed=False)

    # -- the session ------------------------------------------------------------------
    def start_session(self) -> None:
        reason = self.spec["reason"]
        if reason == "start":
            self.mem = Memory()
            self.flush()
            if self.hooks:
                self.hook("SessionStart", source="startup")
            return
        recovering = self.variant["verify"]
        if self.spec.get("fresh"):  # the transcript could not be continued: a new context
            self.mem = Memory(known=[])
            self.trace(kind="fresh_context")
        if self.hooks and recovering and self.spec.get("fresh"):
            self.hook("SessionStart", source="startup")  # a new session: nothing injected
            context, restart = self.resume_cli(restore=False), True
        elif self.hooks and recovering:
            context = str(
                self.hook("SessionStart", source="resume")
                .get("hookSpecificOutput", {})
                .get("additionalContext", "")
            )
            if "was NOT resumed" in context:  # the person decides: --restore
                context = self.resume_cli(restore=True)
            restart = reason == "kill"
        elif self.hooks:
            self.hook("SessionStart", source="startup")
            context, restart = "", False
        elif recovering:
            context, restart = self.resume_cli(restore=False), True
        else:
            context, restart = "", False
            if self.variant["brief"]:
                out = self.ckpt("resume", itask.TASK, "--brief-only", "--json")
                context = str(json.loads(out.stdout or "{}").get("brief_markdown", ""))
        if self.variant["brief"] and context:
            self.read_brief(context, restart=restart)
        elif restart:  # files were put back to before the unfinished step
            self.mem.current, self.mem.actions_done = None, 0
        if recovering and self.status() == "recovering":
            self.confirm()
        self.flush()

    def resume_cli(self, *, restore: bool) -> str:
        args = ["resume", itask.TASK, "--json"] + (["--restore"] if restore else [])
        out = self.ckpt(*args)
        if out.returncode == 10 and not restore:  # source drift: the person says --restore
            self.trace(kind="resume_stopped", outcome="source_drift")
            out = self.ckpt("resume", itask.TASK, "--json", "--restore")
        data = json.loads(out.stdout or "{}")
        self.trace(kind="resume", exit=out.returncode, outcome=data.get("outcome"))
        return str(data.get("brief_markdown") or "")

    def status(self) -> str:
        out = self.ckpt("task", "show", itask.TASK, "--json")
        try:
            return str(json.loads(out.stdout).get("status"))
        except (json.JSONDecodeError, AttributeError):
            return "?"

    def next_step(self) -> str | None:
        for step in self.steps:
            if step.id not in self.mem.done:
                return step.id
        return None

    def run(self) -> int:
        self.start_session()
        while (sid := self.next_step()) is not None:
            self.do_step(itask.BY_ID[sid])
        if self.hooks:
            self.hook("SessionEnd", reason="prompt_input_exit")
        self.trace(kind="finished")
        return 0

    def do_step(self, step: itask.Step) -> None:
        if self.mem.current != step.id or self.mem.actions_done == 0:
            out = self.ckpt("step", "start", itask.TASK, step.id)
            refused = out.returncode != 0
            self.trace(kind="exec", step=step.id, refused=refused, why=out.stderr.strip()[-200:])
            self.mem.current, self.mem.actions_done = step.id, 0
            self.flush()
        for j in range(self.mem.actions_done, len(step.actions)):
            if step.run and step.actions[j] == "runs_row":  # before the expensive run
                self.ckpt("create", "--trigger", "pre_expensive_step", "-m", f"before {step.run}")
            written = itask.act(self.repo, step, step.actions[j], frozenset(self.mem.known))
            self.tool_call(step, j, written)
            self.mem.actions_done = j + 1
            # a kill here loses the last action from the transcript (it is on disk);
            # a quota cut or a compaction writes the context first
            self.point(step.id, f"a{j}")
            self.flush()
        self.point(step.id, "done")
        self.finish_step(step)

    def tool_call(self, step: itask.Step, j: int, written: list[str]) -> None:
        self.tool_uses += 1
        if self.hooks:
            for rel in written:
                path = str(self.repo / rel)
                self.hook(
                    "PostToolUse",
                    tool_name="Write",
                    tool_input={"file_path": path, "content": (self.repo / rel).read_text()[:200]},
                    tool_response={"type": "update", "filePath": path},
                    tool_use_id=f"toolu_{self.spec['session']}_{self.tool_uses}",
                )
        else:
            data = {"input": f"{step.id}:{step.actions[j]}", "output": ", ".join(written)}
            self.ckpt("event", itask.TASK, "--type", "tool.call", "--json", json.dumps(data))

    def finish_step(self, step: itask.Step) -> None:
        crash = self.crash_for(step.id)
        out = self.ckpt("step", "done", itask.TASK, step.id, crash=crash)
        if crash and out.returncode < 0:
            self.die()
        self.point(step.id, "after")
        self.mem.done = sorted(set(self.mem.done) | {step.id})
        self.mem.current, self.mem.actions_done = None, 0
        self.flush()
        if self.hooks:
            reply = self.hook("Stop", stop_hook_active=False)
            failing = re.findall(r"^- (\S+) \((?:fail|error)\)", str(reply.get("reason", "")), re.M)
        else:
            out = self.ckpt("check", itask.TASK, "--json")
            failing = json.loads(out.stdout or "{}").get("blocking_failures") or []
            failing = [f["id"] if isinstance(f, dict) else str(f) for f in failing]
        self.trace(kind="check", step=step.id, failing=sorted(failing))

    def crash_for(self, step: str) -> str | None:
        fired = json.loads(self.fired_path.read_text()) if self.fired_path.exists() else []
        for i, item in enumerate(self.spec["plan"]):
            if item["step"] == step and item["point"] == "crash" and i not in fired:
                fired.append(i)
                self.fired_path.write_text(json.dumps(fired))
                self.trace(kind="interrupt", what="kill", step=step, point=item["crash"])
                return str(item["crash"])
        return None


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    return Agent(spec).run()


if __name__ == "__main__":
    sys.exit(main())
