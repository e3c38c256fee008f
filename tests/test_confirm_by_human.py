"""Issue 10 item 5: `confirm --by-human` needs a person at a terminal, like `trust`.

An agent in a script or a hook (stdin not a terminal) cannot approve itself, neither through
the CLI nor through the Python facade. At a terminal the person sees the goal, the
constraints and the next step, and must answer yes (the default is no).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import BIN_DIR, ckpt, ckpt_json, real_ckpt, write

import git_agentckpt
from git_agentckpt.errors import CkptError, Exit
from git_agentckpt.recovery.person import NeedsTerminal

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
"""


def recovering(repo: Path) -> None:
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    ckpt(
        repo,
        *("task", "start", "t", "--goal", "Reproduce table 2"),
        *("--step", "s1:read", "--step", "s2:train", "--constraint", "seed42"),
    )
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    ckpt(repo, "resume", "t")
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"


def event_types(repo: Path) -> list[str]:
    out = ckpt(repo, "log", "t", "--json").stdout.splitlines()
    return [json.loads(x)["type"] for x in out]


def test_refused_without_a_terminal_in_process_and_from_a_script(repo: Path) -> None:
    recovering(repo)
    before = event_types(repo)
    refused = ckpt(repo, "confirm", "t", "--by-human", input="y\n", ok=False)
    assert refused.exit_code == int(Exit.USAGE) == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "needs a person at a terminal" in line and "stays recovering" in line
    # the installed command, its stdin a pipe, as an agent's shell or a hook would run it
    proc = real_ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    assert proc.returncode == 2, proc.stderr
    assert "stdin is not a terminal" in proc.stderr and "Traceback" not in proc.stderr
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    assert event_types(repo) == before  # nothing recorded


def test_refused_from_the_python_facade(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recovering(repo)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # a pipe, not a terminal
    ck = git_agentckpt.open(str(repo))
    with pytest.raises(NeedsTerminal) as caught:
        ck.confirm("t", None, by_human=True)
    assert isinstance(caught.value, CkptError) and caught.value.exit_status == Exit.USAGE
    with pytest.raises(NeedsTerminal):
        ck.confirm("t", None, by_human=True, ask=lambda subject: True)
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    assert "recovery.confirmed" not in event_types(repo)


def test_at_a_terminal_the_person_sees_what_they_approve_and_must_say_yes(
    repo: Path, person_at_terminal: None
) -> None:
    recovering(repo)
    declined = ckpt(repo, "confirm", "t", "--by-human", input="\n", ok=False)  # default: no
    assert declined.exit_code == Exit.FAILED
    shown = declined.stderr
    assert "Reproduce table 2" in shown
    assert "[seed42] (block) Experiments must use seed 42" in shown
    assert "next step:  s2" in shown and "done:       s1" in shown
    assert "not confirmed: the person declined" in shown
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    assert "recovery.confirmed" not in event_types(repo)
    approved = ckpt(repo, "confirm", "t", "--by-human", "--json", input="y\n")
    result = json.loads(approved.stdout)  # the question went to stderr: stdout is JSON
    assert result["passed"] is True and result["by"] == "human"
    assert ckpt_json(repo, "task", "show", "t")["status"] == "active"
    assert "recovery.confirmed" in event_types(repo)


def test_the_python_facade_asks_through_its_callback(repo: Path, person_at_terminal: None) -> None:
    recovering(repo)
    ck = git_agentckpt.open(str(repo))
    seen: list[dict[str, object]] = []

    def no(subject: dict[str, object]) -> bool:
        seen.append(subject)
        return False

    with pytest.raises(CkptError) as caught:
        ck.confirm("t", None, by_human=True, ask=no)
    assert caught.value.exit_status == Exit.FAILED
    subject = seen[0]
    assert subject["next_step"] == "s2" and subject["done_steps"] == ["s1"]
    assert subject["constraints"] == [
        {"id": "seed42", "severity": "block", "text": "Experiments must use seed 42"}
    ]
    status, verdict, _ = ck.confirm("t", None, by_human=True, ask=lambda s: True)
    assert status == 0 and verdict.passed


def test_a_real_terminal_is_asked(repo: Path) -> None:
    """No seam: the installed command with a pseudo-terminal as stdin asks, and a 'y' confirms."""
    recovering(repo)
    master, slave = os.openpty()
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ.get("PATH", ""))
    try:
        proc = subprocess.Popen(
            ["git", "ckpt", "confirm", "t", "--by-human"],
            cwd=repo,
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        os.write(master, b"y\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0, err
    assert "Experiments must use seed 42" in err and "Does the agent continue" in err
    assert "confirmed: task t is active again" in out
    assert ckpt_json(repo, "task", "show", "t")["status"] == "active"
