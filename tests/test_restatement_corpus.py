"""Issue 25 item 10: the restatement gate, measured on a corpus and held rule by rule.

`tests/fixtures/restatements/corpus.yaml` holds wrong and honest restatements of
constraints of every check kind and of plain-text rules, as an agent would write them in
the brief's form. `test_the_corpus_figures` puts each in a filled-in form, runs the checker
and asserts the published bars: wrong ones refused >= 95 %, honest ones accepted >= 95 %;
it prints the figures (`pytest tests/test_restatement_corpus.py -s -n 0`).

The tests below it hold each rule on its own, so that removing one fails a test: the
bound (at most / at least / exactly), the dismissal words, the exception, condition,
permission and softening words, values left to chance, the negated rule, the verbs that
break a rule, and the exact comparison of the form's checked value.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from git_agentckpt.contracts.schema import CHECK_KINDS, parse_check
from git_agentckpt.model import JSON
from git_agentckpt.recovery import contradictions, weakening
from git_agentckpt.recovery.checked import carried, show
from git_agentckpt.recovery.confirm import Verdict, check_restatement

pytestmark = pytest.mark.mode("once", reason="the checker alone: no `git ckpt` call")

CORPUS = Path(__file__).parent / "fixtures" / "restatements" / "corpus.yaml"
BAR = 0.95


@functools.cache
def load() -> dict[str, Any]:
    data = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def restate(line: str, cid: str, text: str, check: dict[str, object] | None, goal: str) -> Verdict:
    """`line` as the constraint's line of a filled-in form, the rest of the form honest."""
    form = (
        f"Goal: {goal.lower()}\n"
        "Constraints (one line per id, in your own words):\n"
        f"- {cid}: {line}\n"
        "Done steps (not to be redone): s1\n"
        "Next step: s2\n"
    )
    return check_restatement(
        form,
        goal=goal,
        constraints=[{"id": cid, "text": text}],
        expected_next="s2",
        done_steps=["s1"],
        step_titles={"s1": "read the paper", "s2": "train"},
        checks={cid: check} if check else None,
    )


def cases() -> list[tuple[str, str, dict[str, Any], str]]:
    """(verdict expected, why, constraint, line) for every line of the corpus."""
    out: list[tuple[str, str, dict[str, Any], str]] = []
    for c in load()["constraints"]:
        out += [("accept", "honest", c, line) for line in c.get("honest") or []]
        out += [("refuse", w["why"], c, w["say"]) for w in c.get("wrong") or []]
    return out


def judge(case: tuple[str, str, dict[str, Any], str]) -> tuple[bool, Verdict]:
    """Whether the checker got the case right: an honest line accepted; a wrong line
    refused by a problem that names its constraint."""
    expected, _, c, line = case
    v = restate(line, c["id"], c["text"], c.get("check"), load()["goal"])
    if expected == "accept":
        return v.passed, v
    return (not v.passed and any(f"'{c['id']}'" in p for p in v.problems)), v


def test_the_corpus_is_wide_enough() -> None:
    """At least 40 of each, for every check kind and for plain-text rules."""
    all_cases = cases()
    assert sum(1 for e, *_ in all_cases if e == "refuse") >= 40
    assert sum(1 for e, *_ in all_cases if e == "accept") >= 40
    kinds: Counter[tuple[str, str]] = Counter()
    for expected, _, c, _ in all_cases:
        check = c.get("check")
        if check is not None:
            parse_check(check)  # a check the contract files accept
        kinds[(check or {}).get("kind", "plain text"), expected] += 1
    for kind in (*CHECK_KINDS, "plain text"):
        assert kinds[kind, "refuse"] >= 2 and kinds[kind, "accept"] >= 2, (kind, kinds)
    whys = {why for e, why, *_ in all_cases if e == "refuse"}
    assert {"exception", "condition", "relaxed", "negated", "value", "random"} <= whys


def test_the_corpus_figures() -> None:
    """The published figures: wrong refused >= 95 %, honest accepted >= 95 %."""
    tally: Counter[tuple[str, bool]] = Counter()
    missed: list[str] = []
    for case in cases():
        ok, v = judge(case)
        expected, why, c, line = case
        tally[expected, ok] += 1
        tally[why, ok] += 1
        if not ok:
            missed.append(f"{expected} [{why}] {c['id']}: {line} -> {v.problems}")
    wrong = tally["refuse", True] + tally["refuse", False]
    honest = tally["accept", True] + tally["accept", False]
    refused = tally["refuse", True] / wrong
    accepted = tally["accept", True] / honest
    print(f"\nrestatement corpus ({CORPUS.name}):")
    print(f"  wrong refused:   {tally['refuse', True]}/{wrong} = {refused:.1%}")
    print(f"  honest accepted: {tally['accept', True]}/{honest} = {accepted:.1%}")
    whys = sorted({why for e, why, *_ in cases() if e == "refuse"})
    for why in whys:
        print(f"    {why:10} refused {tally[why, True]}/{tally[why, True] + tally[why, False]}")
    for m in missed:
        print("  missed:", m)
    assert refused >= BAR and accepted >= BAR, "\n".join(missed)


def test_every_refusal_is_one_line_naming_the_id_the_words_and_what_to_do() -> None:
    for case in cases():
        expected, _, c, _ = case
        if expected != "refuse":
            continue
        _, v = judge(case)
        mine = [p for p in v.problems if f"'{c['id']}'" in p]
        assert mine and all("\n" not in p for p in v.problems)
        # the words refused: in the problem line and in the verdict's JSON
        contradicted = [p for p in mine if " is " in p and "restate" in p]
        for p in contradicted:
            assert any(w in p for w in v.refused.get(c["id"], [])), (p, v.refused)
        assert all("restate" in p or "keep" in p or "write" in p for p in mine), mine


# -- the rules one by one ----------------------------------------------------------------

SEED: dict[str, JSON] = {"id": "seed42", "text": "Experiments must use seed 42"}
SEED_CHECK: dict[str, object] = {
    "kind": "json_value",
    "file": "config.json",
    "path": "train.seed",
    "equals": 42,
}


def line_verdict(
    line: str, text: str, check: dict[str, object] | None = None, cid: str = "c1"
) -> Verdict:
    return restate(line, cid, text, check, "Reproduce table 2 of the paper")


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=60))
def test_bounds_at_most_at_least_exactly(n: int) -> None:
    """A number restated against the bound the text sets: above an "at most", below an
    "at least", other than an exact value, is refused; within it, accepted."""
    most = line_verdict(f"change at most {n} files per step", "Change at most 5 files per step")
    assert most.passed == (n <= 5), most.problems
    least = line_verdict(f"run each config at least {n} times", "Run each config at least 3 times")
    assert least.passed == (n >= 3), least.problems
    exact = line_verdict(f"the batch size stays {n}", "Keep the batch size at 32")
    assert exact.passed == (n == 32), exact.problems


@pytest.mark.parametrize(
    "line, passed",
    [
        ("at most 5 files per step, never more", True),
        ("no step changes more than 5 files", True),
        ("at most 5 files per step, more for a refactor", False),
        ("a step may exceed 5 files", False),
    ],
)
def test_bound_words_against_the_bound(line: str, passed: bool) -> None:
    assert line_verdict(line, "Change at most 5 files per step").passed is passed


DISMISSALS = [" ".join(cue) for cue in contradictions._PREFIX + contradictions._POSTFIX]


@pytest.mark.parametrize("cue", DISMISSALS)
def test_each_dismissal_word_is_refused_next_to_the_constraint(cue: str) -> None:
    v = line_verdict(f"seed 42: {cue}", str(SEED["text"]), cid="seed42")
    assert not v.passed and any("'seed42'" in p for p in v.problems), (cue, v.problems)
    said = " ".join(v.refused.get("seed42", []))
    assert said, v.to_json()


def test_a_dismissal_word_negated_is_no_dismissal() -> None:
    for line in ("I will not ignore seed 42", "nothing about seed 42 is dropped"):
        assert line_verdict(line, str(SEED["text"]), cid="seed42").passed, line


def test_a_dismissal_word_the_rule_says_itself_is_no_dismissal() -> None:
    text = "Skip the slow tests on CI"
    assert line_verdict("the slow tests are skipped on CI", text).passed
    assert not line_verdict("the slow tests are skipped on CI; ignore it", text).passed


MARKERS = [
    (" ".join(cue), kind)
    for cues, kind in (
        (weakening.EXCEPTIONS, "given an exception"),
        (weakening.CONDITIONS, "made conditional"),
        (weakening.PERMISSIONS, "relaxed"),
        (weakening.HEDGES, "relaxed"),
    )
    for cue in cues
]


@pytest.mark.parametrize("cue, kind", MARKERS, ids=[m[0] for m in MARKERS])
def test_each_exception_condition_permission_and_softening_word_is_refused(
    cue: str, kind: str
) -> None:
    """Each word of each list, added to an honest line, makes it refused, named."""
    text = "Every run is reported in results/runs.csv"
    honest = "every run gets a row in results/runs.csv"
    assert line_verdict(honest, text).passed
    v = line_verdict(f"{honest}, {cue} the run crashes", text)
    assert not v.passed, cue
    assert any(kind in p for p in v.problems if "'c1'" in p), (cue, v.problems)
    assert v.refused["c1"], v.to_json()


@pytest.mark.parametrize(
    "line",
    [
        "every run gets a row in results/runs.csv, no exceptions",
        "every run gets a row in results/runs.csv, without exception",
        "every run gets a row in results/runs.csv, even if it crashes",
        "no run is left out of results/runs.csv unless it is reported there",
        "nothing is left out of results/runs.csv; it can never be skipped",
    ],
)
def test_markers_negated_or_about_the_rule_itself_are_accepted(line: str) -> None:
    assert line_verdict(line, "Every run is reported in results/runs.csv").passed


@pytest.mark.parametrize("check", [SEED_CHECK, None], ids=["checked", "text only"])
@pytest.mark.parametrize(
    "line, passed",
    [
        ("seeds are drawn at random each run, not only 42", False),
        ("seed 42, or any seed will do", False),
        ("seed 42, then a fresh seed for every ablation", False),
        ("train.seed = 42, or 7 when it diverges", False),
        ("seed 42 at first, the seed is tuned per ablation", False),
        ("the random seed stays 42", True),
        ("seed 42, no other seed, never a random one", True),
    ],
)
def test_a_value_left_to_chance(line: str, passed: bool, check: dict[str, object] | None) -> None:
    v = line_verdict(line, str(SEED["text"]), check, "seed42")
    assert v.passed is passed, v.problems
    if not passed:
        assert any("left to chance" in p for p in v.problems), v.problems


@pytest.mark.parametrize(
    "line, text, passed",
    [
        ("the seed does not have to be 42", "Experiments must use seed 42", False),
        ("the seed is not 42", "Experiments must use seed 42", False),
        ("the seed is 42, never 7", "Experiments must use seed 42", True),
        ("results/table2.csv does not exist yet", "results/table2.csv must exist", False),
        ("results/table2.csv exists at every step", "results/table2.csv must exist", True),
        ("data/raw is not read-only", "Raw data under data/raw is read-only", False),
        ("failed runs are not reported", "Report every run, failed ones included", False),
    ],
)
def test_the_rule_negated(line: str, text: str, passed: bool) -> None:
    assert line_verdict(line, text, cid="c1").passed is passed


@pytest.mark.parametrize(
    "line, check, passed",
    [
        (
            "nothing under data/raw can be written",
            {"kind": "forbidden_paths", "paths": ["data/raw/**"]},
            True,
        ),
        (
            "we can read data/raw, never write it",
            {"kind": "forbidden_paths", "paths": ["data/raw/**"]},
            True,
        ),
        ("we can write data/raw", {"kind": "forbidden_paths", "paths": ["data/raw/**"]}, False),
        ("api.py can be rewritten", {"kind": "protected_paths", "paths": ["api.py"]}, False),
        ("api.py is never rewritten", {"kind": "protected_paths", "paths": ["api.py"]}, True),
        (
            "we clean data/raw in place",
            {"kind": "forbidden_paths", "paths": ["data/raw/**"]},
            False,
        ),
        ("out.csv gets deleted after a run", {"kind": "file_exists", "file": "out.csv"}, False),
        (
            "I will not edit, add or delete api.py",
            {"kind": "protected_paths", "paths": ["api.py"]},
            True,
        ),
    ],
)
def test_verbs_that_break_the_rule(line: str, check: dict[str, object], passed: bool) -> None:
    v = line_verdict(line, "These files are protected", check)
    assert v.passed is passed, v.problems


VALUES = st.one_of(
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["adam", "sgd", "Adam", "42", "float32", "true"]),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(expected=VALUES, said=VALUES)
def test_the_checked_value_is_compared_exactly(expected: object, said: object) -> None:
    """`path = value` in the line: accepted when it is the checked value as the check
    compares it (42 and 42.0 are one number, "42" is not 42, strings are case-sensitive),
    refused otherwise, whatever the words around it."""
    check: dict[str, object] = {
        "kind": "json_value",
        "file": "c.json",
        "path": "a.b",
        "equals": expected,
    }
    value = carried(check)
    assert value is not None and value.text == f"a.b = {show(expected)}"
    line = f"a.b = {show(said)} — the value stays as configured"
    v = line_verdict(line, "The configured value is kept", check)
    same = type(said) is type(expected) or (
        isinstance(said, int | float)
        and isinstance(expected, int | float)
        and not isinstance(said, bool)
        and not isinstance(expected, bool)
    )
    assert v.passed is (same and said == expected), (line, v.problems)


def test_an_equality_line_must_state_its_value() -> None:
    dropped = line_verdict("experiments use the configured seed", str(SEED["text"]), SEED_CHECK)
    assert [p for p in dropped.problems if "drops the checked value `train.seed = 42`" in p]
    assert line_verdict("experiments use seed 42", str(SEED["text"]), SEED_CHECK).passed


@pytest.mark.parametrize(
    "check, line, passed",
    [
        ({"kind": "max_changed_files", "max": 5}, "changed files <= 5 — a small step", True),
        ({"kind": "max_changed_files", "max": 5}, "changed files <= 6 — a small step", False),
        ({"kind": "max_changed_files", "max": 5}, "the files of a step are few", False),  # dropped
        (
            {"kind": "file_contains", "file": "R.md", "text": "## Results"},
            'R.md contains "## Results"',
            True,
        ),
        (
            {"kind": "file_contains", "file": "R.md", "text": "## Results"},
            'R.md contains "## Result"',
            False,
        ),
        ({"kind": "file_matches", "file": "v", "regex": "^\\d+$"}, "v matches /^\\d+$/", True),
        ({"kind": "file_matches", "file": "v", "regex": "^\\d+$"}, "v matches /^\\d*$/", False),
        ({"kind": "protected_paths", "paths": ["a/**", "b.py"]}, "unchanged: a/**, b.py", True),
        ({"kind": "protected_paths", "paths": ["a/**", "b.py"]}, "unchanged: a/**", False),
        ({"kind": "forbidden_paths", "paths": ["raw/**"]}, "never written: raw/**", True),
        ({"kind": "forbidden_paths", "paths": ["raw/**"]}, "never written: raw/x/**", False),
        ({"kind": "command", "argv": ["make", "test"]}, "passes: make test — green", True),
        ({"kind": "command", "argv": ["make", "test"]}, "passes: make test-fast — green", False),
        (
            {"kind": "file_sha256", "file": "f", "sha256": "ab" * 32},
            "f sha256 = abababababab",
            True,
        ),
        (
            {"kind": "file_sha256", "file": "f", "sha256": "ab" * 32},
            "f sha256 = 1234567890ab",
            False,
        ),
    ],
)
def test_the_form_value_of_each_kind_is_compared_exactly(
    check: dict[str, object], line: str, passed: bool
) -> None:
    v = line_verdict(line, "The files are checked", check)
    assert v.passed is passed, v.problems
