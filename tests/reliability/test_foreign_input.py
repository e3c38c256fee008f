"""Issue 26, items 9-11: bytes someone else wrote never take over what reads them.

- A fetched trail whose goal, step titles, subject, actor and messages hold terminal
  commands (OSC title, OSC 52 clipboard, CSI 2J, C1 CSI, DEL) reaches a real terminal
  (a pty) escaped through every command that shows it; `--json` stays valid JSON that
  reads back the very text.
- The MCP server answers every request, with its id where it has one: a lone surrogate
  or 300 levels of nesting (even in a key nobody reads) is an error answer, never
  silence.
- An agent hook answers within its 10 s timeout whatever it is given: a transcript
  path that is a FIFO, a 60 MB prompt.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import BIN_DIR, ckpt, remote_and_clones
from hypothesis import given
from hypothesis import strategies as st

from git_agentckpt.display import terminal_text

# -- item 9: terminal escapes from a fetched trail ---------------------------------------

SEQUENCES = "\x1b]0;owned\x07\x1b]52;c;aGk=\x07\x1b[2J\u009b2J\x7f"
# what a terminal acts on: ESC, BEL, DEL, and C1 as UTF-8 (U+0080..U+009F)
RAW = [b"\x1b", b"\x07", b"\x7f", *(bytes([0xC2, c]) for c in range(0x80, 0xA0))]


@pytest.fixture
def fetched(tmp_path: Path) -> Path:
    """Clone b, after fetching task t that clone a wrote with terminal commands in every
    text field the commands show."""
    _, a, b = remote_and_clones(tmp_path)
    ckpt(a, "task", "start", "t", "--goal", "goal" + SEQUENCES, "--step", "s1:read" + SEQUENCES)
    payload = json.dumps({"data": {"message": "said" + SEQUENCES}})
    ckpt(a, "event", "t", "--type", "tool.call", "--actor", "agent" + SEQUENCES, "--json", payload)
    (a / "f").write_text("changed\n")
    ckpt(a, "create", "-t", "t", "-m", "subject" + SEQUENCES)
    ckpt(a, "push")
    ckpt(b, "fetch")
    return b


def on_terminal(repo: Path, *args: str) -> tuple[int, bytes]:
    """`git ckpt args…` with stdout and stderr on a pty: its exit status and the bytes
    the terminal received."""
    master, slave = pty.openpty()
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    proc = subprocess.Popen(
        ["git", "ckpt", *args], cwd=repo, env=env,
        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    got = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        got += data
    os.close(master)
    return proc.wait(timeout=60), bytes(got)


SHOWN = [
    ["list"],
    ["show", "t"],
    ["task", "show", "t"],
    ["task", "list"],
    ["log", "t"],
    ["resume", "--brief-only", "t"],
]


@pytest.mark.parametrize("args", SHOWN, ids=lambda a: " ".join(a))
def test_a_fetched_trail_reaches_a_terminal_escaped(fetched: Path, args: list[str]) -> None:
    code, got = on_terminal(fetched, *args)
    assert code == 0, got
    assert [raw for raw in RAW if raw in got] == [], got
    assert b"\\e]0;owned\\x07" in got and b"\\e[2J\\u009b2J\\u007f" in got, got


@pytest.mark.parametrize(
    ("args", "goal_of"),
    [
        (["task", "show", "t", "--json"], lambda out: out["goal"]),
        (["show", "t", "--json"], lambda out: out["state"]["goal"]),
        (["list", "--json"], lambda out: out[0]["subject"].removeprefix("checkpoint 2 of t: ")),
    ],
    ids=["task show", "show", "list"],
)
def test_json_on_a_terminal_stays_json_and_reads_back_the_text(
    fetched: Path, args: list[str], goal_of: Any
) -> None:
    code, got = on_terminal(fetched, *args)
    assert code == 0, got
    assert [raw for raw in RAW if raw in got] == [], got
    value = json.loads(got.decode().replace("\r\n", "\n"))
    assert goal_of(value) in ("goal" + SEQUENCES, "subject" + SEQUENCES)


def test_log_json_on_a_terminal_is_one_json_event_a_line(fetched: Path) -> None:
    code, got = on_terminal(fetched, "log", "t", "--json")
    assert code == 0, got
    assert [raw for raw in RAW if raw in got] == [], got
    events = [json.loads(line) for line in got.decode().split("\r\n") if line]
    assert [e["actor"]["agent"] for e in events if e["type"] == "tool.call"] == [
        "agent" + SEQUENCES
    ]


@pytest.mark.mode("once", reason="a pure function")
@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)))
def test_terminal_text_leaves_no_control_and_json_reads_the_same(text: str) -> None:
    controls = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))} - {"\n", "\t"}
    assert not controls & set(terminal_text(text))
    doc = json.dumps({"t": text}, ensure_ascii=False)
    assert json.loads(terminal_text(doc)) == {"t": text}
