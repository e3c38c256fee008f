"""`git ckpt integrate`: settings files of every layout (indentation, one line, CRLF, a BOM,
empty containers, whitespace anywhere between tokens) come back byte for byte after
`--remove`, with the user's entries intact and ours complete in between."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_integrate import CLAUDE_EVENTS, CODEX_EVENTS, USER_SETTINGS, assert_ours_complete

from git_agentckpt.integrations import install

# -- formats: every variant gives its bytes back ------------------------------------------

VARIANTS = {
    "two spaces": json.dumps(USER_SETTINGS, indent=2) + "\n",
    "four spaces": json.dumps(USER_SETTINGS, indent=4) + "\n",
    "tabs": json.dumps(USER_SETTINGS, indent="\t") + "\n",
    "compact": json.dumps(USER_SETTINGS, separators=(",", ":")),
    "one line with spaces": json.dumps(USER_SETTINGS) + "\n",
    "crlf": (json.dumps(USER_SETTINGS, indent=2) + "\n").replace("\n", "\r\n"),
    "no final newline": json.dumps(USER_SETTINGS, indent=2),
    "bom": "\ufeff" + json.dumps(USER_SETTINGS, indent=2) + "\n",
    "empty object": "{}",
    "empty object, newline": "{}\n",
    "empty lines object": "{\n}\n",
    "empty hooks": '{\n  "hooks": {}\n}\n',
    "empty hooks, multi-line": '{\n    "hooks": {\n    }\n}\n',
    "empty event array": '{\n  "hooks": {\n    "Stop": []\n  }\n}\n',
    "odd spacing": '{ "a" : 1 ,\n   "hooks" : { "Stop" : [ {"hooks": [ ]} ] } }',
    "prettier style": '{\n  "hooks": {\n    "Stop": [{\n      "hooks": []\n    }]\n  }\n}\n',
}


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_format_round_trips(tmp_path: Path, agent: str, variant: str) -> None:
    original = VARIANTS[variant]
    round_trip(tmp_path, agent, original)


def round_trip(root: Path, agent: str, original: str, claude_md: str | None = None) -> None:
    events = CLAUDE_EVENTS if agent == "claude-code" else CODEX_EVENTS
    spec = install.AGENTS[agent]
    settings_path = root / spec.settings["project"]
    settings_path.parent.mkdir(parents=True, exist_ok=True)
    settings_path.write_bytes(original.encode())
    if claude_md is not None:
        (root / spec.instructions).write_bytes(claude_md.encode())
    places = install.Places(str(root), str(root / ".git-agent"), str(root), str(root), str(root))
    first = install.integrate(agent, "project", places, remove=False)
    assert first.files[0].change == "updated"
    text = settings_path.read_bytes().decode()
    data = json.loads(text.removeprefix("\ufeff"))
    assert_ours_complete(data, agent, events)
    before_obj = json.loads(original.removeprefix("\ufeff"))
    for event, groups in before_obj.get("hooks", {}).items():
        assert data["hooks"][event][: len(groups)] == groups  # the user's, first, untouched
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in before_obj.items() if k != "hooks"
    }
    if "\r\n" in original and "\n" not in original.replace("\r\n", ""):
        assert "\n" not in text.replace("\r\n", "")  # CRLF throughout stays so
    if "\n" not in original and before_obj:
        assert "\n" not in text  # one line stays one line (`{}` gets the default layout)
    second = install.integrate(agent, "project", places, remove=False)
    assert not second.changed and settings_path.read_bytes().decode() == text
    install.integrate(agent, "project", places, remove=True)
    assert settings_path.read_bytes() == original.encode()
    if claude_md is not None:
        assert (root / spec.instructions).read_bytes() == claude_md.encode()
    else:
        assert not (root / spec.instructions).exists()


json_scalars = st.one_of(st.integers(-5, 5), st.booleans(), st.none(), st.text(max_size=4))
user_group = st.fixed_dictionaries(
    {
        "hooks": st.lists(
            st.fixed_dictionaries({"type": st.just("command"), "command": st.text(max_size=6)}),
            max_size=2,
        )
    },
    optional={"matcher": st.text(max_size=4)},
)
user_settings = st.fixed_dictionaries(
    {},
    optional={
        "hooks": st.dictionaries(
            st.sampled_from(["Stop", "PreToolUse", "SessionStart", "Other"]),
            st.lists(user_group, max_size=2),
            max_size=3,
        ),
        "model": json_scalars,
        "nested": st.dictionaries(st.text(max_size=3), json_scalars, max_size=2),
        "list": st.lists(json_scalars, max_size=3),
    },
)
layouts = st.sampled_from([None, 0, 1, 2, 4, "\t", "compact"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=user_settings,
    layout=layouts,
    crlf=st.booleans(),
    final_newline=st.booleans(),
    agent=st.sampled_from(["claude-code", "codex"]),
    claude_md=st.one_of(
        st.none(),
        st.sampled_from(["", "x", "x\n", "x\n\n", "a\r\nb\r\n", "<!-- git-ckpt: no -->\n"]),
    ),
)
def test_any_settings_file_round_trips(
    value: dict[str, Any],
    layout: Any,
    crlf: bool,
    final_newline: bool,
    agent: str,
    claude_md: str | None,
) -> None:
    if layout == "compact":
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = json.dumps(value, indent=layout)
    if final_newline:
        text += "\n"
    if crlf:
        text = text.replace("\n", "\r\n")
    with tempfile.TemporaryDirectory() as root:
        round_trip(Path(root), agent, text, claude_md)


def ragged(value: Any, ws: Iterator[str]) -> str:
    """`value` as JSON with arbitrary whitespace between every token."""
    if isinstance(value, dict):
        parts = [
            next(ws) + json.dumps(k) + next(ws) + ":" + next(ws) + ragged(v, ws) + next(ws)
            for k, v in value.items()
        ]
        return "{" + (",".join(parts) if parts else next(ws)) + "}"
    if isinstance(value, list):
        items = [next(ws) + ragged(v, ws) + next(ws) for v in value]
        return "[" + (",".join(items) if items else next(ws)) + "]"
    return json.dumps(value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=user_settings,
    spaces=st.lists(st.sampled_from(["", " ", "  ", "\n", "\t", "\r\n", "\n    "]), min_size=1),
    agent=st.sampled_from(["claude-code", "codex"]),
)
def test_ragged_whitespace_round_trips(
    value: dict[str, Any], spaces: list[str], agent: str
) -> None:
    ws = itertools.cycle(spaces)
    text = next(ws) + ragged(value, ws) + next(ws)
    with tempfile.TemporaryDirectory() as root:
        round_trip(Path(root), agent, text)
