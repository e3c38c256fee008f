"""`git ckpt log --type/--step/--since/--actor`: the filters select while the log streams
(`-n N` with a filter still reads back only as far as it needs), `--json` is the same
lines filtered, and the text output shows inputs, outputs and tokens, cut and cleaned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import ckpt, ckpt_json, walked
from hypothesis import example, given, settings
from hypothesis import strategies as st

import git_agentckpt
from git_agentckpt.model import NewEvent
from git_agentckpt.store.log_filter import compact, details_line, parse_since, type_matches
from git_agentckpt.store.refs import TaskName

DETAIL = " " * 31


def build(repo: Path) -> dict[str, Any]:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")
    ck = git_agentckpt.open(str(repo))
    ckpt(repo, "step", "start", "t", "s1")
    ck.event("t", "tool.call", {"input": "ls", "output": "a b", "step": "s1"}, actor="claude")
    ck.event("t", "tool.result", {"output": "x", "step": "s1"}, actor="codex")
    ck.event(
        "t",
        "model.call",
        {"input": "plan", "usage": {"input_tokens": 1200, "output_tokens": 300}},
        actor="claude",
    )
    made: dict[str, Any] = ckpt_json(repo, "create", "-t", "t", "-m", "mid")
    ck.event("t", "tool.call", {"input": "pytest -q", "step": "s2"}, actor="codex")
    return made


def log_json(repo: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in ckpt(repo, "log", "t", "--json", *args).stdout.splitlines()]


def test_type_prefix_step_actor(repo: Path) -> None:
    build(repo)
    everything = ckpt(repo, "log", "t", "--json").stdout.splitlines()
    tool = ckpt(repo, "log", "t", "--json", "--type", "tool.").stdout.splitlines()
    assert tool == [x for x in everything if json.loads(x)["type"].startswith("tool.")]
    assert [e["type"] for e in log_json(repo, "--type", "tool")] == [
        "tool.call",
        "tool.result",
        "tool.call",
    ]
    calls = log_json(repo, "--type", "tool.call", "--type", "model.call")
    assert [e["type"] for e in calls] == ["tool.call", "model.call", "tool.call"]
    assert [e["input"] for e in log_json(repo, "--step", "s2")] == ["pytest -q"]
    by_codex = log_json(repo, "--actor", "codex")
    assert [e["type"] for e in by_codex] == ["tool.result", "tool.call"]
    assert log_json(repo, "--actor", "agent=claude", "--type", "model.") == [
        e for e in log_json(repo) if e["type"] == "model.call"
    ]
    assert log_json(repo, "--type", "nothing.such") == []
    assert type_matches("tool.call", ("tool",)) and not type_matches("toolbox.x", ("tool",))


def test_since_an_age_a_date_and_a_checkpoint(repo: Path) -> None:
    made = build(repo)
    everything = log_json(repo)
    assert log_json(repo, "--since", "2h") == everything
    assert log_json(repo, "--since", "2999-01-01") == []
    assert log_json(repo, "--since", "2000-01-01T00:00:00Z") == everything
    from_ckpt = log_json(repo, "--since", made["id"])
    assert from_ckpt[0]["type"] == "checkpoint.prepare"
    assert from_ckpt[0]["links"]["checkpoint"] == made["commit"]
    assert from_ckpt == everything[len(everything) - len(from_ckpt) :]
    assert [e["input"] for e in log_json(repo, "--since", made["id"], "--type", "tool.")] == [
        "pytest -q"
    ]
    assert log_json(repo, "--since", made["id"], "-n", "1") == everything[-1:]
    bad = ckpt(repo, "log", "t", "--since", "yesterday-ish", ok=False)
    assert bad.exit_code == 2 and "--since" in bad.stderr
    assert parse_since("90s", now=1000.0) == "1970-01-01T00:15:10.000Z"
    assert parse_since("2026-11-30T10:00:00+02:00") == "2026-11-30T08:00:00.000Z"


def test_n_with_a_filter_reads_back_only_as_far_as_needed(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    log = git_agentckpt.open(str(repo)).log
    for i in range(200):
        kind = "model.call" if i % 10 == 0 else "tool.call"
        log.append(TaskName("t"), [NewEvent(kind, input={"i": i})])
    with walked() as seen:
        got = log_json(repo, "-n", "2", "--type", "model.call")
    assert [e["input"]["i"] for e in got] == [180, 190]
    assert len(seen) <= 22  # back to the second model.call from the tip, not the whole log
    assert len(log_json(repo, "--type", "model.call")) == 20


def test_text_shows_inputs_outputs_and_tokens_cut_and_clean(repo: Path) -> None:
    build(repo)
    ck = git_agentckpt.open(str(repo))
    ck.event("t", "tool.call", {"input": "x" * 500, "output": "line1\nline2\x1b[31mred"})
    text = ckpt(repo, "log", "t").stdout.splitlines()
    model = text.index(next(x for x in text if x.endswith("model.call by claude")))
    assert text[model + 1] == DETAIL + "in: plan | tokens: input=1200 output=300"
    last = text[-1]
    assert last.startswith(DETAIL + "in: " + "x" * 71 + "…") and "\x1b" not in last
    assert last.endswith("out: line1 line2 [31mred")
    usage = {"output": {"usage": {"tokens": 7}}}
    assert details_line(usage) == 'out: {"usage": {"tokens": 7}} | tokens: 7'
    assert details_line({"data": {"tokens": 7}}) == "tokens: 7"


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(" ab…é"), max_size=8)  # printable: the fast path
    | st.text(alphabet=st.sampled_from(" a\t\n\x1b\x7f\x85\xa0\u2028\u3000\ufeff"), max_size=8)
    | st.text(max_size=90)
)
@example("a  b")
@example(" a")
@example("a\u00a0b")
def test_compact_is_its_rule_for_any_text(text: str) -> None:
    """compact() returns a short clean string as it is (fast path): the same as the rule,
    controls and white space runs made one space, cut to the width."""
    controls = {c: " " for c in [*range(32), *range(0x7F, 0xA0)]}
    for width in (5, 72):
        ruled = " ".join(text[: width * 8].translate(controls).split())
        ruled = ruled if len(ruled) <= width else ruled[: width - 1] + "…"
        assert compact(text, width) == ruled
