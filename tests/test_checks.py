"""Each check kind, passing and failing, and the refusals that keep checks safe."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from git_agentckpt.contracts.checks import (
    CheckContext,
    CheckResult,
    run_check,
    values_equal,
)
from git_agentckpt.contracts.schema import Check, parse_check


def check(**fields: object) -> Check:
    return parse_check(dict(fields))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "config.json").write_text(
        json.dumps({"train": {"seed": 42, "lr": 0.1, "name": "42"}, "layers": [{"size": 8}]})
    )
    (root / "config.yaml").write_text("train:\n  seed: 42\n  amp: true\nlayers:\n  - size: 8\n")
    (root / "pyproject.toml").write_text('[tool.exp]\nseed = 42\nflags = ["a", "b"]\n')
    (root / "README.md").write_text("Experiments use seed = 42.\nSecond line\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def run(chk: Check | None, work: Path, **kwargs: object) -> CheckResult:
    result = run_check(chk, CheckContext(work, **kwargs))  # type: ignore[arg-type]
    assert "\n" not in result.detail and result.detail
    return result


def test_no_check_is_unchecked(work: Path) -> None:
    assert run(None, work).status == "unchecked"


def test_unknown_kind_is_an_error_not_an_exception(work: Path) -> None:
    result = run(Check("teleport", {}), work)
    assert result.status == "error" and "teleport" in result.detail


def test_file_exists(work: Path) -> None:
    assert run(check(kind="file_exists", file="README.md"), work).status == "pass"
    assert run(check(kind="file_exists", file="src"), work).status == "pass"
    result = run(check(kind="file_exists", file="missing.txt"), work)
    assert result == CheckResult("fail", "missing.txt: file not found")


def test_file_contains(work: Path) -> None:
    assert (
        run(check(kind="file_contains", file="README.md", text="seed = 42"), work).status == "pass"
    )
    result = run(check(kind="file_contains", file="README.md", text="seed = 7"), work)
    assert result.status == "fail"
    assert result.detail == 'README.md does not contain "seed = 7"'
    missing = run(check(kind="file_contains", file="nope.md", text="x"), work)
    assert missing == CheckResult("fail", "nope.md: file not found")


def test_file_contains_finds_text_across_read_chunks(work: Path) -> None:
    big = b"x" * (1024 * 1024 - 3) + b"NEEDLE" + b"y" * 10
    (work / "big.bin").write_bytes(big)
    assert run(check(kind="file_contains", file="big.bin", text="NEEDLE"), work).status == "pass"
    assert run(check(kind="file_contains", file="big.bin", text="NEEDLEZ"), work).status == "fail"


def test_file_matches_is_multiline(work: Path) -> None:
    result = run(check(kind="file_matches", file="README.md", regex=r"^Second\s+line$"), work)
    assert result == CheckResult("pass", "README.md:2 matches /^Second\\s+line$/")
    result = run(check(kind="file_matches", file="README.md", regex=r"seed\s*=\s*7\b"), work)
    assert result.status == "fail" and "no match" in result.detail


def test_file_matches_bad_regex_in_hand_made_check_is_error(work: Path) -> None:
    result = run(Check("file_matches", {"file": "README.md", "regex": "(unclosed"}), work)
    assert result.status == "error" and "bad regular expression" in result.detail


def test_file_sha256(work: Path) -> None:
    digest = hashlib.sha256((work / "README.md").read_bytes()).hexdigest()
    assert (
        run(check(kind="file_sha256", file="README.md", sha256=digest.upper()), work).status
        == "pass"
    )
    (work / "README.md").write_text("changed\n")
    result = run(check(kind="file_sha256", file="README.md", sha256=digest), work)
    changed = hashlib.sha256(b"changed\n").hexdigest()
    assert result == CheckResult("fail", f"README.md: sha256 is {changed}, expected {digest}")


@pytest.mark.parametrize(
    ("kind", "file"),
    [("json_value", "config.json"), ("yaml_value", "config.yaml")],
)
def test_structured_values(work: Path, kind: str, file: str) -> None:
    ok = run(check(kind=kind, file=file, path="train.seed", equals=42), work)
    assert ok == CheckResult("pass", f"{file}: train.seed == 42")
    assert run(check(kind=kind, file=file, path="layers.0.size", equals=8), work).status == "pass"
    wrong = run(check(kind=kind, file=file, path="train.seed", equals=7), work)
    assert wrong == CheckResult("fail", f"{file}: train.seed is 42 (integer), expected 7 (integer)")
    as_string = run(check(kind=kind, file=file, path="train.seed", equals="42"), work)
    assert as_string.status == "fail" and 'expected "42" (string)' in as_string.detail
    missing = run(check(kind=kind, file=file, path="train.epochs", equals=1), work)
    assert missing.status == "fail" and "no key 'epochs' in train" in missing.detail
    out_of_range = run(check(kind=kind, file=file, path="layers.3.size", equals=8), work)
    assert out_of_range.status == "fail" and "out of range" in out_of_range.detail
    not_index = run(check(kind=kind, file=file, path="layers.first", equals=8), work)
    assert not_index.status == "fail" and "not an index" in not_index.detail
    scalar = run(check(kind=kind, file=file, path="train.seed.x", equals=8), work)
    assert scalar.status == "fail" and "not a mapping or list" in scalar.detail


def test_json_value_string_is_not_a_number(work: Path) -> None:
    result = run(check(kind="json_value", file="config.json", path="train.name", equals=42), work)
    assert result.status == "fail"
    result = run(check(kind="json_value", file="config.json", path="train.name", equals="42"), work)
    assert result.status == "pass"


def test_toml_value(work: Path) -> None:
    ok = run(check(kind="toml_value", file="pyproject.toml", path="tool.exp.seed", equals=42), work)
    assert ok.status == "pass"
    lst = check(kind="toml_value", file="pyproject.toml", path="tool.exp.flags", equals=["a", "b"])
    assert run(lst, work).status == "pass"
    bad = run(check(kind="toml_value", file="pyproject.toml", path="tool.exp.seed", equals=1), work)
    assert bad.status == "fail"


@pytest.mark.parametrize(
    ("kind", "name", "content", "expected"),
    [
        ("json_value", "bad.json", '{"a": ', "not valid JSON (line 1"),
        ("yaml_value", "bad.yaml", "a: [1\nb: 2\n", "not valid YAML (line 2"),
        ("toml_value", "bad.toml", "a = = 1\n", "not valid TOML"),
        ("json_value", "bin.json", b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_unparsable_files_fail_with_a_clear_detail(
    work: Path, kind: str, name: str, content: str | bytes, expected: str
) -> None:
    path = work / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run(check(kind=kind, file=name, path="a", equals=1), work)
    assert result.status == "fail" and expected in result.detail, result


def test_value_of_missing_file_fails(work: Path) -> None:
    result = run(check(kind="yaml_value", file="nope.yaml", path="a", equals=1), work)
    assert result == CheckResult("fail", "nope.yaml: file not found")


@pytest.mark.parametrize("rel", ["/etc/passwd", "../outside.txt", "src/../../outside.txt"])
def test_paths_leaving_the_tree_are_refused(work: Path, rel: str) -> None:
    (work.parent / "outside.txt").write_text("secret")
    for chk in (
        Check("file_exists", {"file": rel}),
        Check("file_contains", {"file": rel, "text": "secret"}),
        Check("file_sha256", {"file": rel, "sha256": "0" * 64}),
        Check("json_value", {"file": rel, "path": "a", "equals": 1}),
    ):
        result = run(chk, work)
        assert result.status == "error", (chk, result)
        assert "refusing" in result.detail


def test_symlink_escaping_the_tree_is_refused(work: Path) -> None:
    (work.parent / "outside.txt").write_text("secret")
    (work / "link.txt").symlink_to(work.parent / "outside.txt")
    (work / "linkdir").symlink_to(work.parent)
    for rel in ("link.txt", "linkdir/outside.txt"):
        result = run(check(kind="file_contains", file=rel, text="secret"), work)
        assert result.status == "error" and "symlink resolves outside" in result.detail
        assert run(check(kind="file_exists", file=rel), work).status == "error"


def test_symlink_inside_the_tree_is_followed(work: Path) -> None:
    (work / "readme-link").symlink_to("README.md")
    assert run(check(kind="file_contains", file="readme-link", text="seed"), work).status == "pass"


def test_directory_and_fifo_are_not_read(work: Path) -> None:
    result = run(check(kind="file_contains", file="src", text="x"), work)
    assert result == CheckResult("fail", "src: not a regular file (a directory)")
    os.mkfifo(work / "pipe")  # opening it for reading must not block the check
    result = run(check(kind="file_sha256", file="pipe", sha256="0" * 64), work)
    assert result.status == "fail" and "not a regular file" in result.detail


def test_protected_paths(work: Path) -> None:
    chk = check(kind="protected_paths", paths=["src/api/**", "docs/*.md"])
    ok = run(chk, work, changed_paths=frozenset({"src/app.py", "docs/sub/x.md"}))
    assert ok.status == "pass"
    bad = run(chk, work, changed_paths=frozenset({"src/api/v1.py", "docs/a.md", "README.md"}))
    assert bad.status == "fail"
    assert bad.detail.startswith("2 protected path(s) changed: docs/a.md, src/api/v1.py")
    unknown = run(chk, work)
    assert unknown.status == "error" and "unknown" in unknown.detail


def test_protected_paths_lists_a_few_and_counts_the_rest(work: Path) -> None:
    changed = frozenset(f"src/api/m{i:02}.py" for i in range(12))
    result = run(check(kind="protected_paths", paths=["src/api/**"]), work, changed_paths=changed)
    assert "src/api/m00.py" in result.detail and "(+7 more)" in result.detail


def test_forbidden_paths_uses_written_then_changed(work: Path) -> None:
    chk = check(kind="forbidden_paths", paths=["data/raw/"])
    written = frozenset({"data/raw/a.csv"})
    changed = frozenset({"src/app.py"})
    assert run(chk, work, written_paths=written, changed_paths=changed).status == "fail"
    assert run(chk, work, written_paths=frozenset(), changed_paths=written).status == "pass"
    assert run(chk, work, changed_paths=written).status == "fail"
    assert run(chk, work, changed_paths=changed).status == "pass"
    assert run(chk, work).status == "error"


def test_max_changed_files(work: Path) -> None:
    chk = check(kind="max_changed_files", max=2)
    assert run(chk, work, changed_paths=frozenset({"a", "b"})).status == "pass"
    result = run(chk, work, changed_paths=frozenset({"a", "b", "c"}))
    assert result == CheckResult("fail", "3 files changed since the baseline, at most 2 allowed")
    assert run(chk, work).status == "error"


def test_command_without_runner_is_untrusted_and_never_runs(work: Path) -> None:
    chk = check(kind="command", argv=["touch", "pwned"], timeout=5)
    result = run(chk, work)
    assert result.status == "untrusted"
    assert "touch pwned" in result.detail
    assert not (work / "pwned").exists()


def test_command_runner_gets_the_check(work: Path) -> None:
    seen: list[Check] = []

    def runner(c: Check) -> CheckResult:
        seen.append(c)
        return CheckResult("pass", "ran\nfine")

    chk = check(kind="command", argv=["true"], timeout=5)
    result = run(chk, work, command_runner=runner)
    assert seen == [chk]
    assert result == CheckResult("pass", "ran\\nfine")


def test_untrusted_detail_escapes_control_characters(work: Path) -> None:
    chk = check(kind="command", argv=["echo", "\x1b[2Jhidden\u202e"], timeout=5)
    result = run(chk, work)
    assert "\x1b" not in result.detail and "\u202e" not in result.detail
    assert "\\e[2Jhidden\\u202e" in result.detail


def test_hand_made_check_with_bad_params_is_an_error(work: Path) -> None:
    bad_glob = Check("protected_paths", {"paths": ["a//b"]})
    assert run(bad_glob, work, changed_paths=frozenset({"a"})).status == "error"
    assert run(Check("file_exists", {"file": 3}), work).status == "error"
    assert (
        run(Check("protected_paths", {"paths": "src"}), work, changed_paths=frozenset()).status
        == "error"
    )
    assert (
        run(Check("max_changed_files", {"max": "3"}), work, changed_paths=frozenset()).status
        == "error"
    )


@pytest.mark.parametrize(
    ("found", "expected", "same"),
    [
        (42, 42, True),
        (42, 42.0, True),
        (42, "42", False),
        ("42", 42, False),
        (True, 1, False),
        (1, True, False),
        (False, False, True),
        (None, None, True),
        (None, "null", False),
        ([1, "a"], [1, "a"], True),
        ([1, "a"], [1, "b"], False),
        ([1], [1, 1], False),
        ({"a": [1, {"b": True}]}, {"a": [1, {"b": True}]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": 1}, {"a": True}, False),
    ],
)
def test_values_equal_is_type_aware(found: object, expected: object, same: bool) -> None:
    assert values_equal(found, expected) is same


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values)
def test_values_equal_after_a_json_round_trip(value: object) -> None:
    assert values_equal(json.loads(json.dumps(value)), value)


@given(json_values, json_values)
def test_values_equal_is_symmetric(a: object, b: object) -> None:
    assert values_equal(a, b) == values_equal(b, a)
