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
import select
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import pytest
from daemon_helpers import GIT_CKPT
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


# -- item 10: the MCP server answers every request ---------------------------------------


def _call(msg_id: int, args: str, extra: str = "") -> bytes:
    """A raw tools/call line of task_status with `args` as its arguments' JSON text."""
    params = f'{{"name":"task_status","arguments":{args}{extra}}}'
    return f'{{"jsonrpc":"2.0","id":{msg_id},"method":"tools/call","params":{params}}}'.encode()


DEEP = "[" * 300 + "]" * 300
UNANSWERED = [  # each left the agent waiting (issue 26): a lone surrogate, 300 levels
    (2, _call(2, '{"task":"\\udcff"}')),
    (3, _call(3, '{"task":"\\ud800"}')),
    (4, _call(4, "{}", ',"ignored":"x\\udcffy"')),
    (5, b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"\\ud800":1}}'),
    (6, _call(6, "{}", f',"ignored":{DEEP}')),
    (7, _call(7, f'{{"task":{DEEP}}}')),
]


class Pipe:
    """`git ckpt mcp` in `repo`, spoken to in raw JSON-RPC lines."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(
            [GIT_CKPT, "mcp"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 60.0) -> dict[str, Any]:
        """The next line the server writes: it must come within `timeout` seconds."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer: the client would wait for ever"
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return reply

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read().decode()


@pytest.mark.mode("inline", reason="`mcp` runs in its own process in both modes")
def test_the_mcp_server_answers_every_request(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    pipe = Pipe(repo)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw"}}
    pipe.send(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
    )
    assert pipe.answer()["id"] == 1
    pipe.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    for msg_id, line in UNANSWERED:
        pipe.send(line)
        reply = pipe.answer()
        assert reply["id"] == msg_id and reply["error"]["code"] == -32700, reply
        words = "a lone surrogate" if msg_id < 6 else "nested deeper than the server reads"
        assert reply["error"]["message"].startswith(f"Parse error: {words}"), reply
    # no id to be read: answered with "id": null, as JSON-RPC says
    for line, code in (
        (b"not JSON", -32700),
        (b"[1]", -32600),
        (_call(8, "[" * 10**5 + "]" * 10**5), -32700),
    ):
        pipe.send(line)
        reply = pipe.answer()
        assert reply["id"] is None and reply["error"]["code"] == code, reply
    pipe.send(b'{"jsonrpc":"2.0","id":9}')  # JSON, not a request
    assert pipe.answer()["error"] == {
        "code": -32600,
        "message": "Invalid request: method: Field required",
    }
    pipe.send(_call(10, "{}"))  # and it still serves
    reply = pipe.answer()
    assert reply["id"] == 10 and "next step: s1" in reply["result"]["content"][0]["text"]
    code, err = pipe.close()
    assert code == 0 and "Traceback" not in err, err


# -- item 11: hook inputs that hang ------------------------------------------------------

HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook command (its `timeout`), as installed


def hook_call(repo: Path, event: str, stdin: bytes | IO[bytes]) -> dict[str, Any]:
    """`git-ckpt hook claude-code EVENT` as the agent runs it (the script itself, so that
    a timeout kills it): its answer must come within the hook's timeout (a hang fails the
    test, never blocks it)."""
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    given = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
    proc = subprocess.run(
        [GIT_CKPT, "hook", "claude-code", event], cwd=repo, env=env,
        capture_output=True, timeout=HOOK_TIMEOUT, check=False, **given,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def payload(event: str, **fields: Any) -> bytes:
    return json.dumps({"session_id": "s-1", "hook_event_name": event, **fields}).encode()


@pytest.mark.parametrize("event", ["PostToolUse", "SessionEnd"])
def test_a_transcript_path_that_is_a_fifo_is_no_transcript(repo: Path, event: str) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    fifo = repo.parent / "transcript.jsonl"
    os.mkfifo(fifo)  # nobody ever writes it: opening it to read waits for a writer
    sent = payload(event, transcript_path=str(fifo), tool_name="Bash", tool_input={})
    assert hook_call(repo, event, sent) == {}
    types = [
        e["type"] for e in map(json.loads, ckpt(repo, "log", "t", "--json").stdout.splitlines())
    ]
    assert ("tool.call" if event == "PostToolUse" else "session.end") in types


def test_a_60_mb_prompt_is_logged_within_the_hooks_timeout(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    prompt = "word " * 12_000_000
    started = time.monotonic()
    assert hook_call(repo, "UserPromptSubmit", payload("UserPromptSubmit", prompt=prompt)) == {}
    assert time.monotonic() - started < HOOK_TIMEOUT
    last = json.loads(ckpt(repo, "log", "t", "--json", "-n", "1").stdout)
    assert last["type"] == "user.prompt"
    assert last["input"] == prompt[:2000] + f"…[{len(prompt) - 2000} more characters]"


def test_a_stdin_past_64_mib_is_not_read_and_answered(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    source = subprocess.Popen(["head", "-c", str(200 << 20), "/dev/zero"], stdout=subprocess.PIPE)
    assert source.stdout is not None
    with source.stdout:
        said = hook_call(repo, "Stop", source.stdout)
    source.kill()
    source.wait()
    assert said == {
        "systemMessage": "git ckpt hook: the hook's stdin holds more than 64 MiB: not read"
    }
