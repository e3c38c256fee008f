"""The marked block `git ckpt integrate` puts into CLAUDE.md or AGENTS.md, and takes out.

The block sits between two HTML comment lines (invisible when the file is rendered) at the
end of the file. What was put before it (a blank line, or a line ending the file lacked)
is recorded, so that taking the block out gives back the file's bytes exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from git_agentckpt.settings import CONTRACTS_DIR

BEGIN = "<!-- git-ckpt: begin"
END = "<!-- git-ckpt: end -->"
CONSTRAINTS_IMPORT = f"@{CONTRACTS_DIR}/constraints.md"


def _how_to(task_hint: str) -> list[str]:
    """When to call which command (the real commands and flags of `git ckpt`)."""
    return [
        f"- TASK below is your task's name: {task_hint}.",
        "- Before you begin a step of the plan: `git ckpt step start TASK STEP_ID`"
        " (add `--risk high` before an expensive or risky step: a full checkpoint is"
        " taken first).",
        "- When the step's work is finished and its files are written:"
        " `git ckpt step done TASK STEP_ID` (this commits the checkpoint that makes it"
        " done); when it failed: `git ckpt step fail TASK STEP_ID`.",
        "- Before you say the work is done, and after changing files a constraint is"
        " about: `git ckpt check` (exit status 1: a blocking constraint fails; fix it"
        " first).",
        "- After a compaction, a restart, or whenever you are unsure what is done:"
        " `git ckpt resume TASK --brief-only` prints the goal, the done steps, the next"
        " step and every constraint. Trust it over your memory.",
        "- When a command says the task is recovering: restate goal, constraints and"
        " next step as the brief asks and pipe it to"
        " `git ckpt confirm TASK --restatement -`.",
    ]


_TASK_HINT = "`$GIT_CKPT_TASK` when set, else the single active task of `git ckpt task list`"


def claude_block_lines() -> list[str]:
    """CLAUDE.md: the constraints imported (Claude Code reads `@path` lines), then how
    to use the checkpoints."""
    return [
        "## Constraints of this project (kept by git ckpt)",
        "",
        "Never break these; they survive every compaction:",
        "",
        CONSTRAINTS_IMPORT,
        "",
        f"The same rules, machine-checked by `git ckpt check`, are in `{CONTRACTS_DIR}/`"
        " (`constraints.yaml`). Change them only when the user asks.",
        "",
        "The hooks of `git ckpt` checkpoint your work and log your tool calls. Your part:",
        "",
        *_how_to(_TASK_HINT),
    ]


def codex_block_lines() -> list[str]:
    """AGENTS.md: when to call `step start/done`, `check` and `resume --brief-only`, and
    where the constraints are."""
    return [
        "## Checkpoints and constraints (git ckpt)",
        "",
        "The hooks of `git ckpt` checkpoint your work, log your tool calls and give you a"
        " recovery brief after a compaction or a restart. Your part:",
        "",
        f"- Your constraints live in `{CONTRACTS_DIR}/`: `constraints.md` (the rules, for"
        " people and for you) and `constraints.yaml` (the same rules, checked by"
        " `git ckpt check`). Read them before you start and never break them; change them"
        " only when the user asks.",
        *_how_to(_TASK_HINT),
    ]


def block_text(lines: list[str], agent: str, newline: str) -> str:
    head = (
        f"{BEGIN} (written by `git ckpt integrate {agent}`;"
        f" `git ckpt integrate {agent} --remove` takes it out) -->"
    )
    return newline.join([head, *lines, END]) + newline


@dataclass(frozen=True)
class Span:
    start: int  # the start of the begin line
    end: int  # after the end line's line ending
    body_start: int  # after the begin line


def find_block(text: str) -> Span | None:
    """The first marked block of `text` (begin line to end line), or None."""
    at = 0
    while True:
        begin = text.find(BEGIN, at)
        if begin < 0:
            return None
        if begin == 0 or text[begin - 1] == "\n":
            break
        at = begin + 1
    finish = text.find(END, begin)
    if finish < 0:
        return None
    end = finish + len(END)
    if text.startswith("\r\n", end):
        end += 2
    elif text.startswith("\n", end):
        end += 1
    body = text.find("\n", begin)
    return Span(begin, end, body + 1 if 0 <= body < end else end)


def newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


@dataclass(frozen=True)
class BlockEdit:
    text: str
    prefix: str  # what was put before the block (recorded; `remove` takes it out too)


def add_block(text: str, lines: list[str], agent: str) -> BlockEdit:
    """`text` with the block at its end, or its block brought up to date in place."""
    nl = newline_of(text)
    block = block_text(lines, agent, nl)
    span = find_block(text)
    if span is not None:
        return BlockEdit(text[: span.start] + block + text[span.end :], "")
    if not text or text.endswith(("\n\n", "\r\n\r\n")):
        prefix = ""
    elif text.endswith("\n"):
        prefix = nl
    else:
        prefix = nl + nl
    return BlockEdit(text + prefix + block, prefix)


def remove_block(text: str, prefix: str | None) -> str:
    """`text` without its block and what was put before it (`prefix`, when recorded and
    still there; else one blank line before the block). Unchanged when it has none."""
    span = find_block(text)
    if span is None:
        return text
    start = span.start
    if prefix and span.end < len(text) and prefix in ("\n\n", "\r\n\r\n"):
        prefix = prefix[: len(prefix) // 2]  # text follows: keep the line ending it needs
    if prefix is not None:
        if text[:start].endswith(prefix):
            start -= len(prefix)
    elif text[:start].endswith(("\n\n", "\r\n\r\n")):
        start -= 2 if text[:start].endswith("\r\n") else 1
    return text[:start] + text[span.end :]
