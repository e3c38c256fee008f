"""Issue 9, item 4 (input side): deeply nested JSON, bytes that are not UTF-8 and
over-long paths given by the user are usage errors (exit 2, one line naming the
input), never "internal error (a bug)", and nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt

USAGE = 2
BIN = os.path.dirname(sys.executable)


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.fixture
def task(repo: Path) -> Path:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    return repo


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref")


def assert_usage(repo: Path, args: list[str], words: str, stdin: str | None = None) -> None:
    before = refs(repo)
    result = ckpt(repo, *args, input=stdin, ok=False)
    err = result.stderr.strip()
    assert result.exit_code == USAGE, f"{args}: {result.exit_code} {err}"
    assert words in err, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1 or err.startswith("Usage:"), err
    assert refs(repo) == before


INPUTS = [
    (["event", "t", "--type", "tool.call", "--json"], "--json payload"),
    (["create", "-t", "t", "--state"], "--state"),
    (["step", "done", "t", "s1", "--output"], "--output"),
    (["step", "fail", "t", "s1", "--output"], "--output"),
]


@pytest.mark.parametrize(("args", "name"), INPUTS)
def test_deeply_nested_json_is_refused_from_each_source(
    task: Path, args: list[str], name: str
) -> None:
    for depth in (101, 900, 5000):  # 5000 stops json itself (RecursionError)
        text = nested(depth)
        if name == "--state":
            text = '{"summary": {"text": ' + text + "}}"
        assert_usage(task, [*args, text], "nested too deeply")
        (task / "deep.json").write_text(text)
        assert_usage(task, [*args, "deep.json"], "nested too deeply")
        assert_usage(task, [*args, "-"], "from stdin is nested too deeply", stdin=text)
    assert_usage(task, ["create", "-t", "t", "--param", "p=" + nested(200)], "--param p")


def test_json_at_the_depth_limit_is_stored_and_read_back(task: Path) -> None:
    payload = '{"data": ' + nested(99) + "}"
    ckpt(task, "event", "t", "--type", "tool.call", "--json", payload)
    logged = json.loads(ckpt(task, "log", "t", "--json").stdout.splitlines()[-1])
    assert json.dumps(logged, separators=(",", ":")).count('{"a":') == 99
    ckpt(task, "step", "start", "t", "s1")
    ckpt(task, "step", "done", "t", "s1", "--output", nested(100))
    ckpt(task, "resume", "t")


@pytest.mark.parametrize(("args", "name"), INPUTS)
def test_bytes_that_are_not_utf8(task: Path, args: list[str], name: str) -> None:
    bad = b'{"x": "caf\xe9"}'
    (task / "latin1.json").write_bytes(bad)
    assert_usage(task, [*args, "latin1.json"], f"{name} from latin1.json is not valid UTF-8")
    # stdin: CliRunner hands str input over as UTF-8; give it the raw bytes instead
    before = refs(task)
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"], "GIT_CKPT_SERVER": "off"}
    proc = subprocess.run(
        ["git", "ckpt", *args, "-"], cwd=task, env=env, input=bad, capture_output=True
    )
    err = proc.stderr.decode()
    assert proc.returncode == USAGE and "from stdin is not valid UTF-8" in err, err
    assert refs(task) == before
    # a lone surrogate escaped in valid JSON cannot be stored as UTF-8 either
    assert_usage(task, [*args, '{"x": "\\udcff"}'], "not valid Unicode")


def test_command_line_bytes_that_are_not_utf8(task: Path) -> None:
    """Python decodes argv bytes that are not UTF-8 as lone surrogates ('\\udce9')."""
    for args in (
        ["task", "start", "u", "--goal", "caf\udce9"],
        ["create", "-t", "t", "-m", "caf\udce9"],
        ["event", "t", "--type", "tool.call", "--json", '{"x": "caf\udce9"}'],
        ["create", "-t", "t", "--trigger", "caf\udce9"],
    ):
        assert_usage(task, args, "is not valid UTF-8")
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"], "GIT_CKPT_SERVER": "off"}
    proc = subprocess.run(
        [b"git", b"ckpt", b"create", b"-t", b"t", b"-m", b"caf\xe9"],
        cwd=task,
        env=env,
        capture_output=True,
    )
    assert proc.returncode == USAGE and b"not valid UTF-8" in proc.stderr, proc.stderr


def test_files_read_by_the_tool(task: Path) -> None:
    (task / "asserts.yaml").write_bytes(b"- id: a\n  check: 'file_exists:caf\xe9'\n")
    assert_usage(task, ["create", "-t", "t", "--assertions", "asserts.yaml"], "asserts.yaml")
    settings = task / ".agent" / "ckpt.toml"
    settings.parent.mkdir(exist_ok=True)
    settings.write_bytes(b'[snapshot]\nsecret_paths = ["caf\xe9"]\n')
    assert_usage(task, ["create", "-t", "t"], ".agent/ckpt.toml: not valid UTF-8")
    settings.write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    assert_usage(task, ["create", "-t", "t"], ".agent/ckpt.toml: nested too deeply")
    settings.unlink()
    (task / "restated.txt").write_bytes(b"goal: caf\xe9\n")
    result = ckpt(task, "confirm", "t", "--restatement", "restated.txt", ok=False)
    assert result.exit_code in (USAGE, 13), result.stderr  # 13: not recovering
    assert "internal error" not in result.stderr


def test_paths_too_long_for_the_file_system(task: Path) -> None:
    too_long = "x" * 300
    for args, name in INPUTS:
        assert_usage(task, [*args, too_long], f"{name} file")
    assert_usage(task, ["create", "-t", "t", "--assertions", too_long], "assertions file")
