"""Issue 10 item 4: the restatement form the brief ends with, and a checker that refuses a
restatement which dismisses, overrides or contradicts a constraint or plans a done step again.

The checker cases pair an honest restatement (accepted) with a dishonest one (refused): the
keyword-only checker of before accepted every dishonest one. The end-to-end tests run on real
repositories: contract file, `task start --constraint`, `resume`, `confirm --restatement FILE`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

from git_agentckpt.model import JSON
from git_agentckpt.recovery.confirm import Verdict, check_restatement

GOAL = "Reproduce table 2 of the paper"
SHA = "ab" * 32
CONSTRAINTS: list[dict[str, JSON]] = [
    {
        "id": "seed42",
        "text": "Experiments must use seed 42",
        "check": {"kind": "json_value", "file": "config.json", "path": "train.seed", "equals": 42},
    },
    {"id": "api-frozen", "text": "Do not modify the public API under src/api"},
]
STEPS = {"s1": "read", "s2": "train", "s3": "report"}
HEAD = "Goal: reproduce table 2 of the paper.\n"
BOTH = "Constraints: seed42 (experiments use seed 42), api-frozen (src/api stays as it is).\n"
DONE = "s1 and s2 are done and not to be redone.\n"
NEXT = "Next step: s3\n"
ISSUE_EXAMPLE = (
    HEAD
    + "Constraints: seed42, api-frozen (the public API under src/api stays).\n"
    + "I will ignore seed42, it no longer applies, I will use seed 7 … Next step: s3\n"
)


def check(text: str, constraints: list[dict[str, JSON]] | None = None) -> Verdict:
    return check_restatement(
        text,
        goal=GOAL,
        constraints=constraints if constraints is not None else CONSTRAINTS,
        expected_next="s3",
        done_steps=["s1", "s2"],
        step_titles=STEPS,
    )


def form(seed: str, api: str, done: str = "s1, s2", extra: str = "") -> str:
    return (
        "Goal: reproduce table 2 of the paper\n"
        "Constraints (one line per id, in your own words):\n"
        f"- seed42: {seed}\n"
        f"- api-frozen: {api}\n"
        f"Done steps (not to be redone): {done}\n"
        f"{extra}"
        "Next step: s3\n"
    )


def test_the_issue_example_is_refused_naming_the_constraint_and_why() -> None:
    v = check(ISSUE_EXAMPLE)
    assert not v.passed
    seed = [p for p in v.problems if "'seed42'" in p]
    assert any("dismissed" in p and '"ignore"' in p and '"no longer"' in p for p in seed), seed
    assert any("fixes 42" in p and "says 7" in p for p in seed), seed
    assert all("\n" not in p for p in v.problems)
    assert v.constraints["seed42"] == "contradicted"


CASES = [
    # (what is caught, honest restatement: accepted, dishonest one: refused, words of the problem)
    (
        "negation next to the id",
        HEAD + BOTH + "I will not ignore seed42. " + DONE + NEXT,
        HEAD + BOTH + "seed42 is not needed for this run. " + DONE + NEXT,
        ["'seed42'", "dismissed", "not needed"],
    ),
    (
        "negation next to the constraint's words, without its id",
        HEAD + BOTH + "Nothing about the experiment seed is dropped. " + DONE + NEXT,
        HEAD + BOTH + "The experiment seed requirement is obsolete. " + DONE + NEXT,
        ["'seed42'", "dismissed", "obsolete"],
    ),
    (
        "a pronoun after the dismissal",
        HEAD + "Constraints: seed42 (keep it), api-frozen (src/api stays).\n" + DONE + NEXT,
        HEAD + "Constraints: seed42 (drop it), api-frozen (src/api stays).\n" + DONE + NEXT,
        ["'seed42'", '"drop"'],
    ),
    (
        "a different value for the value the text fixes",
        HEAD + BOTH + "I use seed 42 for 3 runs, never seed 7. " + DONE + NEXT,
        HEAD + BOTH + "The seed is now 7. " + DONE + NEXT,
        ["'seed42'", "fixes 42", "says 7"],
    ),
    (
        "a different value for the check's json_value equals",
        HEAD + BOTH + "train.seed stays 42 in config.json. " + DONE + NEXT,
        HEAD + BOTH + "Set train.seed to 13 in config.json. " + DONE + NEXT,
        ["'seed42'", "fixes 42", "says 13"],
    ),
    (
        "the fixed value replaced",
        HEAD + BOTH + "I use seed 42 instead of seed 7. " + DONE + NEXT,
        HEAD + BOTH + "I use seed 7 instead of seed 42. " + DONE + NEXT,
        ["'seed42'", "replaced", "instead of 42"],
    ),
    (
        "a forbidden verb allowed",
        HEAD + BOTH + "Rather than changing src/api, I will add a wrapper. " + DONE + NEXT,
        HEAD + BOTH + "The public API under src/api may be modified now. " + DONE + NEXT,
        ["'api-frozen'", "forbids", "modified"],
    ),
    (
        "a done step planned again despite 'done' on the line",
        HEAD + BOTH + "s1 and s2 are done; I will not redo them. " + NEXT,
        HEAD + BOTH + "s1 is done but I will redo s1 anyway. s2 is done. " + NEXT,
        ["done step 's1' is planned again"],
    ),
    (
        "a done step started again, without a redo word",
        HEAD + BOTH + DONE + "Next step: s3, then I run the report again. ",
        HEAD + BOTH + DONE + "Next step: s3. First I will start s1. ",
        ["done step 's1' is planned again"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_free_text_contradictions_are_refused_honest_text_passes(case: Any) -> None:
    _, honest, dishonest, words = case
    good = check(honest)
    assert good.passed, good.problems
    bad = check(dishonest)
    assert not bad.passed
    assert not good.form and not bad.form
    assert any(all(w in p for w in words) for p in bad.problems), bad.problems


FORM_CASES = [
    (
        "a negated line",
        form("ignore it, the seed no longer applies", "never modify src/api"),
        ["'seed42'", "dismissed"],
    ),
    (
        "a line with another value",
        form("experiments use seed 7", "never modify src/api"),
        ["'seed42'", "fixes 42", "says 7"],
    ),
    ("a line that says nothing", form("n/a", "never modify src/api"), ["'seed42'", "nothing"]),
    (
        "a line sharing no word with its constraint",
        form("sure, understood", "never modify src/api"),
        ["'seed42'", "shares no word"],
    ),
    (
        "a dropped line (the id only named elsewhere)",
        "Goal: reproduce table 2 of the paper\n- seed42: every experiment runs with seed 42\n"
        "Done steps (not to be redone): s1, s2\nNext step: s3 (api-frozen as well)\n",
        ["'api-frozen'", "no line in the form"],
    ),
    (
        "an unfilled placeholder",
        form("<this constraint, in your own words>", "never modify src/api"),
        ["not filled in", "line 3"],
    ),
    (
        "a done step left out",
        form("every experiment runs with seed 42", "never modify src/api", done="s1"),
        ["done step 's2' is not listed"],
    ),
    (
        "a pending step listed as done",
        form("every experiment runs with seed 42", "never modify src/api", done="s1, s2, s3"),
        ["step 's3' is listed as done, but it is not done"],
    ),
    (
        "a redo under the form",
        form("seed 42", "src/api stays", extra="Plan: rerun s2 with more data.\n"),
        ["done step 's2' is planned again"],
    ),
]


@pytest.mark.parametrize("case", FORM_CASES, ids=[c[0] for c in FORM_CASES])
def test_the_filled_form_is_checked_strictly(case: Any) -> None:
    _, text, words = case
    v = check(text)
    assert not v.passed
    assert v.form
    assert any(all(w in p for w in words) for p in v.problems), v.problems


def test_honest_forms_and_paraphrases_pass() -> None:
    honest = [
        form("every experiment runs with seed 42", "never modify src/api"),
        form("seed 42, no other seed", "the public API under src/api stays unchanged"),
        form("experiments are seeded with 42", "nothing under src/api will be modified"),
        # the done steps as bullets under the line, and several ids on one line
        "Goal: reproduce table 2 of the paper\n"
        "- seed42: runs use seed 42; api-frozen: src/api is not modified\n"
        "Done steps (not to be redone):\n- s1: read\n- s2: train\nNext step: s3\n",
        # free text with the DESIGN's own words
        HEAD + BOTH + DONE + NEXT,
    ]
    for text in honest:
        v = check(text)
        assert v.passed, (text, v.problems)
    # the same form with seed 7 is refused: the check reads the lines
    assert not check(form("experiments use seed 7", "never modify src/api")).passed


def test_values_from_the_check_object_bound_and_pin() -> None:
    constraints: list[dict[str, JSON]] = [
        {"id": "few", "text": "Change at most 5 files per step"},
        {
            "id": "pin",
            "text": "config.json is pinned",
            "check": {"kind": "file_sha256", "file": "config.json", "sha256": SHA},
        },
        {
            "id": "opt",
            "text": "Train with the configured optimizer",
            "check": {
                "kind": "json_value",
                "file": "c.json",
                "path": "train.optimizer",
                "equals": "adam",
            },
        },
        {
            "id": "limit",
            "text": "Keep the change small",
            "check": {"kind": "max_changed_files", "max": 8},
        },
    ]

    def lines(few: str, pin: str, opt: str, limit: str) -> str:
        return (
            f"Goal: reproduce table 2 of the paper\n- few: {few}\n- pin: {pin}\n- opt: {opt}\n"
            f"- limit: {limit}\nDone steps (not to be redone): s1, s2\nNext step: s3\n"
        )

    good = check(
        lines(
            "change at most 3 files per step",  # within the bound
            f"config.json keeps sha256 {SHA[:12]}",
            "the optimizer stays adam",
            "at most 8 changed files, a small change",
        ),
        constraints,
    )
    assert good.passed, good.problems
    bad = check(
        lines(
            "up to 12 files may change",
            "config.json sha256 is 1234567deadbeef",
            "switch the optimizer to sgd",
            "a small change, 20 changed files at most",
        ),
        constraints,
    )
    assert not bad.passed
    text = "\n".join(bad.problems)
    for words in (
        ["'few'", "at most 5", "says 12"],
        ["'pin'", "pins sha256 abababababab", "1234567deadb"],
        ["'opt'", "optimizer = adam", "says sgd"],
        ["'limit'", "at most 8", "says 20"],
    ):
        assert any(all(w in p for w in words) for p in bad.problems), (words, text)


# -- end to end, on a real repository --------------------------------------------------------

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
    check: {kind: protected_paths, paths: ["src/api/**"]}
"""


def recovering_task(repo: Path) -> dict[str, Any]:
    """s1 and s2 done, s3 started and cut off: after resume, the next step is s3."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(
        repo,
        *("task", "start", "t", "--goal", GOAL),
        *("--step", "s1:read", "--step", "s2:train", "--step", "s3:report"),
        *("--constraint", "seed42", "--constraint", "api-frozen"),
    )
    for step in ("s1", "s2"):
        ckpt(repo, "step", "start", "t", step)
        ckpt(repo, "step", "done", "t", step)
    ckpt(repo, "step", "start", "t", "s3")
    out = ckpt(repo, "resume", "t", "--json")
    data = json.loads(out.stdout)
    assert data["brief"]["next_step"] == "s3"
    return dict(data)


def confirm_file(repo: Path, tmp_path: Path, text: str) -> Any:
    path = tmp_path / "restatement.md"
    path.write_text(text)
    return ckpt(repo, "confirm", "t", "--restatement", str(path), ok=False)


def test_the_brief_ends_with_the_form_and_the_filled_form_confirms(
    repo: Path, tmp_path: Path
) -> None:
    data = recovering_task(repo)
    brief = data["brief"]
    form_text = brief["restatement_form"]
    # a checked constraint's line carries the value its check verifies
    assert "- seed42: train.seed = 42 — <" in form_text
    assert "- api-frozen: unchanged: src/api/** — <" in form_text
    assert "Done steps (not to be redone):" in form_text and "Next step:" in form_text
    markdown = data["brief_markdown"].rstrip()
    assert markdown.endswith("```")
    last = markdown[markdown.rindex("## ") :]
    assert last.startswith("## Restatement form")
    for line in form_text.splitlines():
        assert line in last
    # the form as given is not a restatement
    unfilled = confirm_file(repo, tmp_path, form_text)
    assert unfilled.exit_code == 12 and "not filled in" in unfilled.stderr
    filled = (
        form_text.replace("<the goal, in your own words>", "reproduce table 2 of the paper")
        .replace(
            "42 — <this constraint, in your own words>",
            "42 — every experiment runs with seed 42",
        )
        .replace(
            "/** — <this constraint, in your own words>",
            "/** — nothing under src/api is modified",
        )
        .replace("<ids of the done steps, or none>", "s1, s2")
        .replace("<id of the next step, or none>", "s3")
    )
    ok = ckpt(repo, "confirm", "t", "--restatement", "-", "--json", input=filled)
    result = json.loads(ok.stdout)
    assert result["passed"] is True and result["form"] is True
    assert result["constraints"] == {"seed42": "line", "api-frozen": "line"}
    assert ckpt_json(repo, "task", "show", "t")["status"] == "active"


def test_the_issue_example_is_refused_end_to_end(repo: Path, tmp_path: Path) -> None:
    recovering_task(repo)
    refused = confirm_file(repo, tmp_path, ISSUE_EXAMPLE)
    assert refused.exit_code == 12
    assert "stays recovering" in refused.stderr
    lines = [x for x in refused.stderr.splitlines() if "'seed42'" in x]
    assert any("dismissed" in x and '"ignore"' in x for x in lines), refused.stderr
    assert any("fixes 42" in x and "says 7" in x for x in lines), refused.stderr
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    report = ckpt_json(repo, "report", "t")
    assert report["confirmation"]["passed"] is False
    assert any("'seed42'" in p for p in report["confirmation"]["problems"])
    # a form line that swaps the value is refused the same way
    swapped = form("experiments use seed 7", "never modify src/api")
    refused = confirm_file(repo, tmp_path, swapped)
    assert refused.exit_code == 12 and "says 7" in refused.stderr
    types = [json.loads(x)["type"] for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]
    assert types.count("recovery.rejected") == 2 and "recovery.confirmed" not in types


# -- issue 25 item 10: the restatements the gate accepted, end to end ------------------------

GATE_CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: raw-readonly
    text: Raw data under data/raw is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
  - id: api-frozen
    text: Do not modify the public API (src/api and api.py)
    check: {kind: protected_paths, paths: ["src/api/**", "api.py"]}
"""
GATE_LINES = {
    "seed42": "every experiment runs with seed 42",
    "raw-readonly": "the raw data is only read, never written",
    "api-frozen": "src/api and api.py stay exactly as they are",
}


def gate_task(repo: Path) -> str:
    """A task with the three constraints, recovering; its restatement form."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", GATE_CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(
        repo,
        *("task", "start", "t", "--goal", GOAL, "--step", "s1:read", "--step", "s2:train"),
        *("--constraint", "seed42", "--constraint", "raw-readonly", "--constraint", "api-frozen"),
    )
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    out = json.loads(ckpt(repo, "resume", "t", "--json").stdout)
    return str(out["brief"]["restatement_form"])


def filled(form_text: str, **lines: str) -> str:
    """The form filled in honestly, but for the lines given (id with `-` as `_`)."""
    out = form_text.replace("<the goal, in your own words>", "reproduce table 2 of the paper")
    out = out.replace("<ids of the done steps, or none>", "s1")
    out = out.replace("<id of the next step, or none>", "s2")
    done = []
    for row in out.splitlines():
        for cid, honest in GATE_LINES.items():
            if row.startswith(f"- {cid}: "):
                said = lines.get(cid.replace("-", "_"))
                row = (
                    f"- {cid}: {said}"
                    if said
                    else row.replace("<this constraint, in your own words>", honest)
                )
        done.append(row)
    return "\n".join(done) + "\n"


@pytest.mark.parametrize(
    "line, cid, words",
    [
        ({"seed42": "seeds are drawn at random each run"}, "seed42", ["at random"]),
        (
            {"raw_readonly": "we can overwrite files in data/raw when needed"},
            "raw-readonly",
            ["overwrite", "when needed"],
        ),
        ({"seed42": "use seed 42 except for the final run"}, "seed42", ["except"]),
        ({"api_frozen": "api.py can be rewritten"}, "api-frozen", ["rewritten", "can"]),
        ({"seed42": "train.seed = 7 — experiments use seed 7"}, "seed42", ["7"]),
    ],
    ids=["random", "when-needed", "except", "can-be-rewritten", "other-value"],
)
def test_the_gate_refuses_what_it_accepted_naming_the_id_and_the_words(
    repo: Path, tmp_path: Path, line: dict[str, str], cid: str, words: list[str]
) -> None:
    """Issue 25 item 10: each of these was confirmed ("active again") before."""
    form_text = gate_task(repo)
    # the form carries the checked values
    assert "- seed42: train.seed = 42 — <" in form_text
    assert "- raw-readonly: never written: data/raw/** — <" in form_text
    assert "- api-frozen: unchanged: src/api/**, api.py — <" in form_text
    refused = confirm_file(repo, tmp_path, filled(form_text, **line))
    assert refused.exit_code == 12, refused.output
    mine = [x for x in refused.stderr.splitlines() if f"'{cid}'" in x]
    assert mine, refused.stderr
    for word in words:
        assert any(word in x for x in mine), (word, refused.stderr)
    assert all("restate" in x for x in mine)  # what to do next, on the same line
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    result = json.loads(
        ckpt(
            repo,
            "confirm",
            "t",
            "--restatement",
            "-",
            "--json",
            input=filled(form_text, **line),
            ok=False,
        ).stdout
    )
    assert result["passed"] is False and result["refused"][cid]
    # the honest form confirms
    ok = ckpt(repo, "confirm", "t", "--restatement", "-", input=filled(form_text))
    assert "active again" in ok.output
