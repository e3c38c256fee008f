"""Glob semantics: gitignore-like matching on POSIX relative paths."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest
from conftest import git
from hypothesis import given
from hypothesis import strategies as st

from git_agentckpt.globs import compile_glob, match_any, match_excluded, normalize_path


def matches(pattern: str, path: str) -> bool:
    return compile_glob(pattern).fullmatch(path) is not None


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        # `**` at the end: everything under the directory, not the directory itself
        ("src/api/**", "src/api/a.py", True),
        ("src/api/**", "src/api/v1/deep/b.py", True),
        ("src/api/**", "src/api", False),
        ("src/api/**", "src/apix/a.py", False),
        ("src/api/**", "x/src/api/a.py", False),
        # `**/` at the start: any depth, including none
        ("**/*.log", "a.log", True),
        ("**/*.log", "x/y/z/a.log", True),
        ("**/*.log", "x/y/a.txt", False),
        # `/**/` in the middle: zero or more directories
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/x/y/c", False),
        ("**", "anything/at/all", True),
        # `*` and `?` do not cross `/`
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("src/*", "src/a", True),
        ("src/*", "src/a/b", False),
        ("src/?.py", "src/a.py", True),
        ("src/?.py", "src/ab.py", False),
        ("a?b", "a/b", False),
        ("a*b", "a/b", False),
        ("a**b", "axyb", True),
        ("a**b", "a/b", False),
        # no `/`: the basename at any depth
        ("*.log", "debug.log", True),
        ("*.log", "deep/er/debug.log", True),
        ("*.log", "debug.log.txt", False),
        ("*.log", "x.log/inner", False),
        ("Makefile", "sub/Makefile", True),
        # a `/` anchors at the root; a leading `/` only anchors
        ("/build", "build", True),
        ("/build", "x/build", False),
        ("docs/index.md", "docs/index.md", True),
        ("docs/index.md", "x/docs/index.md", False),
        ("./docs", "docs/a.md", True),
        ("./docs", "x/docs/a.md", False),
        # trailing `/`: a directory, its contents at any depth when unanchored
        ("build/", "build/out.o", True),
        ("build/", "a/build/out.o", True),
        ("build/", "build", False),
        ("src/gen/", "src/gen/x/y.c", True),
        ("src/gen/", "a/src/gen/x.c", False),
        ("src/*/", "src/a/b.c", True),
        ("src/*/", "src/a.c", False),
        # a literal last component also covers what is under it
        ("data/raw", "data/raw", True),
        ("data/raw", "data/raw/2024/x.csv", True),
        ("data/raw", "data/rawx", False),
        ("node_modules", "web/node_modules/left-pad/index.js", True),
        # character classes never match `/`
        ("[abc].txt", "b.txt", True),
        ("[abc].txt", "d.txt", False),
        ("[a-c].txt", "c.txt", True),
        ("[!a-c].txt", "d.txt", True),
        ("[!a-c].txt", "a.txt", False),
        ("[^a].txt", "b.txt", True),
        ("x[!a]y", "x/y", False),
        ("x[/]y", "x/y", False),
        ("[]a].txt", "].txt", True),
        ("[.txt", "[.txt", True),
        # escapes and regex metacharacters are literal
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
        ("a+b(c).txt", "a+b(c).txt", True),
        ("a.b", "axb", False),
    ],
)
def test_glob_table(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


@pytest.mark.parametrize("pattern", ["", "/", "//", "a//b", "[z-a].txt"])
def test_invalid_patterns_raise_value_error(pattern: str) -> None:
    with pytest.raises(ValueError):
        compile_glob(pattern)


def test_compiled_patterns_are_cached() -> None:
    assert compile_glob("src/**/x.py") is compile_glob("src/**/x.py")


def test_match_any_negation_last_match_wins() -> None:
    patterns = ["src/api/**", "!src/api/internal/**", "src/api/internal/keep.py"]
    assert match_any(patterns, "src/api/public.py")
    assert not match_any(patterns, "src/api/internal/helper.py")
    assert match_any(patterns, "src/api/internal/keep.py")
    assert not match_any(patterns, "docs/readme.md")
    assert not match_any([], "anything")


def test_match_any_normalizes_path_and_accepts_one_string() -> None:
    assert match_any(["src/*.py"], "./src/a.py")
    assert match_any("src/*.py", "src/a.py")
    assert not match_any("src/*.py", "src")
    assert normalize_path("./a/b/") == "a/b"


def test_escaped_bang_is_a_literal() -> None:
    assert match_any(["\\!important"], "!important")
    assert not match_any(["\\!important"], "important")


segment = st.text(alphabet="abcxyz_-.", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
dirs = st.lists(segment, min_size=0, max_size=4)


@given(st.lists(segment, min_size=1, max_size=4), dirs)
def test_literal_path_matches_itself_and_everything_under(
    parts: list[str], under: list[str]
) -> None:
    pattern = "/".join(parts)
    assert matches(pattern, pattern)
    assert matches(pattern, "/".join([*parts, *under]))
    assert not matches(pattern, pattern + "x")


@given(segment, segment, segment)
def test_star_never_crosses_a_slash(a: str, b: str, c: str) -> None:
    assert matches(f"{a}/*", f"{a}/{b}")
    assert not matches(f"{a}/*", f"{a}/{b}/{c}")
    assert not matches(f"{a}/?*", f"{a}/{b}/{c}")


@given(dirs, segment)
def test_double_star_slash_matches_at_any_depth(parents: list[str], name: str) -> None:
    assert matches(f"**/{name}", "/".join([*parents, name]))


@given(st.lists(segment, min_size=1, max_size=3), dirs, segment)
def test_trailing_double_star_is_exactly_the_inside(
    prefix: list[str], inner: list[str], leaf: str
) -> None:
    pattern = "/".join(prefix) + "/**"
    assert matches(pattern, "/".join([*prefix, *inner, leaf]))
    assert not matches(pattern, "/".join(prefix))
    assert not matches(pattern, "/".join(prefix) + "x/" + leaf)


glob_token = st.sampled_from(["a", "b", ".", "*", "?", "[ab]", "[!a]", "x"])
glob_segment = st.lists(glob_token, min_size=1, max_size=5).map("".join)


@given(glob_segment, dirs, st.text(alphabet="abx.", min_size=1, max_size=6))
def test_basename_pattern_is_double_star_slash_pattern(
    pattern: str, parents: list[str], name: str
) -> None:
    path = "/".join([*parents, name])
    assert matches(pattern, path) == matches("**/" + pattern, path)


@given(glob_segment, st.text(alphabet="abx.", min_size=1, max_size=6))
def test_one_segment_agrees_with_fnmatch(pattern: str, name: str) -> None:
    assert matches(pattern, name) == fnmatch.fnmatchcase(name, pattern)


GITIGNORE_CASES = [
    (".env", ".env"),
    (".env", "a/b/.env"),
    (".env", "a/.env/bin/python"),
    ("*.pem", "x.pem/inner"),
    ("**/.aws/credentials", "home/.aws/credentials"),
    ("**/.kube/config", ".kube/config"),
    ("/top.key", "top.key"),
    ("/top.key", "sub/top.key"),
    ("secrets/", "secrets/a.txt"),
    ("secrets/", "x/secrets/a.txt"),
    ("a/**/b", "a/x/y/b"),
    ("*.tfvars", "infra/prod.tfvars"),
    ("!keep.env", "keep.env"),
]


def test_secret_matching_is_gits_own_ignore_rules(tmp_path: Path) -> None:
    """match_excluded (secret_paths) answers as `git check-ignore` does, pattern by pattern
    and for a whole list with a negation (a file under an excluded directory stays out)."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    patterns = [".env", "*.pem", "!x.pem", "logs/", "!logs/keep.txt", "**/.kube/config"]
    cases = [(p, path) for p, path in GITIGNORE_CASES] + [
        (None, path)
        for path in ("x.pem", "y.pem", "logs/keep.txt", "logs/a.txt", "a/.env", "k/.kube/config")
    ]
    for pattern, path in cases:
        used = [pattern] if pattern is not None else patterns
        (repo / ".git" / "info" / "exclude").write_text("\n".join(used) + "\n")
        proc = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", path], cwd=repo, capture_output=True
        )
        assert match_excluded(used, path) is (proc.returncode == 0), (used, path)
