"""Crafted trees: a checkpoint that arrives by fetch never writes outside the work tree.

Trees are crafted with real git (`hash-object -t tree --literally` takes any
bytes), then made into checkpoints as another clone's trail could hold them
(`helpers.forge_checkpoint`: the store's own transaction, with the crafted tree
as its snapshot). Every test
keeps a sentinel directory outside the work tree and checks that nothing in
it changed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import BIN_DIR, ckpt, ckpt_json, forge_checkpoint, write

from git_agentckpt.errors import CorruptError, UsageError
from git_agentckpt.git import tree_check
from git_agentckpt.git.repo import Change, GitRepo
from git_agentckpt.git.restore import RestorePlan, apply_restore, export_tree
from git_agentckpt.git.safe_write import SafeWriter
from git_agentckpt.git.tree_check import check_tree, folds_case, is_dotgit, is_dotgitmodules

Entry = tuple[str, bytes, str]  # (mode, name, object id)


# -- crafting -------------------------------------------------------------------------------


def obj(repo: Path, data: bytes, kind: str = "blob") -> str:
    proc = subprocess.run(
        ["git", "hash-object", "-t", kind, "--literally", "-w", "--stdin"],
        cwd=repo,
        input=data,
        capture_output=True,
        check=True,
    )
    return proc.stdout.decode().strip()


def tree(repo: Path, *entries: Entry, base: bool = True) -> str:
    """A tree of exactly these entries (in this order), after HEAD's own when `base`."""
    body = b"".join(m.encode() + b" " + n + b"\0" + bytes.fromhex(i) for m, n, i in entries)
    if base:
        body = (
            subprocess.run(
                ["git", "cat-file", "tree", "HEAD^{tree}"],
                cwd=repo,
                capture_output=True,
                check=True,
            ).stdout
            + body
        )
    return obj(repo, body, "tree")


def blob(repo: Path, text: str) -> str:
    return obj(repo, text.encode())


def dir_with(repo: Path, name: bytes, text: str = "pwned\n") -> Entry:
    """A directory entry `name` holding one file `pwned`."""
    return ("40000", name, tree(repo, ("100644", b"pwned", blob(repo, text)), base=False))


def link(repo: Path, name: bytes, target: str) -> Entry:
    return ("120000", name, blob(repo, target))


def crafted_checkpoint(repo: Path, tree_id: str, task: str = "evil", *asserts: str) -> str:
    """A checkpoint of `tree_id`, as a fetched trail could hold it (`forge_checkpoint`);
    `asserts`: its `--assert` specs. Its id."""
    made = forge_checkpoint(repo, tree_id, task, asserts)
    assert made["tree"] == tree_id
    return str(made["id"])


def listing(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` (not .git): file content, link target or 'dir'."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A sentinel directory beside the repository: nothing may ever change in it."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "keep.txt").write_text("keep\n")
    return d


def refuse_restore(repo: Path, ckpt_id: str, *names: str) -> str:
    """Restore must exit 6, name the checkpoint and entry, and write nothing."""
    before = listing(repo)
    result = ckpt(repo, "restore", ckpt_id, ok=False)
    assert result.exit_code == 6, result.output
    err = result.stderr
    assert f"refusing checkpoint {ckpt_id}" in err and "crafted or damaged" in err
    for name in names:
        assert name in err
    assert len(err.strip().splitlines()) == 1
    assert listing(repo) == before
    return err


# -- the reported attack: a link and a directory of one name ------------------------------


@pytest.mark.parametrize("target", ["absolute", "../outside", "src"])
def test_symlink_beside_a_directory_of_the_same_name(
    repo: Path, outside: Path, target: str
) -> None:
    """On main this restore wrote s/pwned through the link (exit 0)."""
    where = str(outside) if target == "absolute" else target
    evil = crafted_checkpoint(repo, tree(repo, link(repo, b"s", where), dir_with(repo, b"s")))
    err = refuse_restore(repo, evil, "'s'")
    if target == "src":  # a link inside the tree: only the duplicate name is wrong
        assert "appears twice in one directory" in err
    assert listing(outside) == {"keep.txt": b"keep\n"}
    assert not (repo / "src" / "pwned").exists()


def test_duplicate_deep_in_the_tree_is_named_by_its_path(repo: Path, outside: Path) -> None:
    inner = tree(repo, link(repo, b"s", "../../outside"), dir_with(repo, b"s"), base=False)
    evil = crafted_checkpoint(
        repo, tree(repo, ("40000", b"a", tree(repo, ("40000", b"b", inner), base=False)))
    )
    refuse_restore(repo, evil, "'a/b/s'")
    assert listing(outside) == {"keep.txt": b"keep\n"}


# -- names ----------------------------------------------------------------------------------

DOTGIT_ALIASES = [
    b".git",
    b".GIT",
    b".gIt",
    b"git~1",
    b"GIT~1",
    b".git ",
    b".git.",
    b".git. . ",
    b".git::$INDEX_ALLOCATION",
    b".git:stream",
    b".git\\hooks",
    ".g\u200cit".encode(),
    "\u200e.git".encode(),
    ".GI\u200dT\ufeff".encode(),
    ".git\u206a".encode(),
]


@pytest.mark.parametrize("name", DOTGIT_ALIASES, ids=repr)
@pytest.mark.parametrize("deep", [False, True], ids=["top", "nested"])
def test_dotgit_and_its_aliases_are_refused(repo: Path, name: bytes, deep: bool) -> None:
    entry = dir_with(repo, name, "[core]\n\thooksPath = /tmp\n")
    if deep:
        entry = ("40000", b"sub", tree(repo, entry, base=False))
    evil = crafted_checkpoint(repo, tree(repo, entry))
    config = (repo / ".git" / "config").read_bytes()
    err = refuse_restore(repo, evil)
    assert "is .git, or a name that a file system takes for .git" in err
    assert (repo / ".git" / "config").read_bytes() == config
    assert not (repo / ".git" / "pwned").exists()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (b"..", "is not a file name"),
        (b".", "is not a file name"),
        (b"a/../../x", "holds a '/'"),
    ],
    ids=repr,
)
def test_impossible_names_are_refused(repo: Path, outside: Path, name: bytes, reason: str) -> None:
    evil = crafted_checkpoint(repo, tree(repo, dir_with(repo, name)))
    err = refuse_restore(repo, evil)
    assert reason in err
    assert listing(outside) == {"keep.txt": b"keep\n"}
    assert not (repo.parent / "pwned").exists()


@pytest.mark.parametrize(
    "name", [b".gitmodules", b".GITMODULES", b"gitmod~1", b"gi7eba~9", b".gitmodules ."]
)
def test_gitmodules_as_a_link_is_refused(repo: Path, name: bytes) -> None:
    evil = crafted_checkpoint(repo, tree(repo, link(repo, name, "README.md")))
    err = refuse_restore(repo, evil)
    assert "symbolic link named .gitmodules" in err


def test_an_unknown_mode_is_refused(repo: Path) -> None:
    odd = crafted_checkpoint(repo, tree(repo, ("100600", b"odd", blob(repo, "x"))))
    assert "unknown file mode 100600" in refuse_restore(repo, odd, "'odd'")


def test_trees_libgit2_cannot_parse_are_refused_too(repo: Path) -> None:
    # no checkpoint can be made of these (libgit2 fails on them): check them alone
    grepo = GitRepo.discover(str(repo))
    empty_name = tree(repo, dir_with(repo, b""))
    with pytest.raises(CorruptError, match="refusing checkpoint L: '' is not a file name"):
        check_tree(grepo, empty_name, str(repo), "L")
    body = subprocess.run(
        ["git", "cat-file", "tree", "HEAD^{tree}"], cwd=repo, capture_output=True, check=True
    ).stdout
    broken = obj(repo, body[:-3], "tree")
    with pytest.raises(CorruptError, match="'\\(root\\)' is a malformed tree object"):
        check_tree(grepo, broken, str(repo), "L")
    not_a_tree = tree(repo, ("40000", b"d", blob(repo, "a blob\n")))
    with pytest.raises(CorruptError, match="'d' cannot be read as a tree"):
        check_tree(grepo, not_a_tree, str(repo), "L")


# -- symbolic links -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "bad"),
    [
        ([("up", "..")], "up"),
        ([("up", "../outside")], "up"),
        ([("abs", "/etc")], "abs"),
        ([("sub/up", "../../outside")], "sub/up"),
        ([("sub/x", "./../.././outside")], "sub/x"),
        ([("here", "."), ("esc", "here/..")], "esc"),  # `here` is the root itself: .. leaves it
        ([("a", "sub/b"), ("sub/b", ".."), ("c", "a/..")], "c"),  # through two links
        ([("e", "")], "e"),
    ],
    ids=lambda v: repr(v),
)
def test_links_leading_outside_are_refused(
    repo: Path, outside: Path, entries: list[tuple[str, str]], bad: str
) -> None:
    top: list[Entry] = []
    sub: list[Entry] = []
    for path, target in entries:
        name = path.split("/")[-1].encode()
        (sub if path.startswith("sub/") else top).append(link(repo, name, target))
    if sub:
        top.append(("40000", b"sub", tree(repo, *sub, base=False)))
    evil = crafted_checkpoint(repo, tree(repo, *top))
    refuse_restore(repo, evil, repr(bad))
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_links_that_stay_inside_restore(repo: Path) -> None:
    evil = crafted_checkpoint(
        repo,
        tree(
            repo,
            link(repo, b"readme", "README.md"),
            link(repo, b"loop", "loop"),
            (
                "40000",
                b"d",
                tree(
                    repo, link(repo, b"up", "../src/./app.py"), link(repo, b"dot", ".."), base=False
                ),
            ),
        ),
    )
    ckpt(repo, "restore", evil)
    assert os.readlink(repo / "readme") == "README.md"
    assert os.readlink(repo / "d" / "up") == "../src/./app.py"
    assert (repo / "d" / "up").read_text() == "print('hi')\n"


# -- case and Unicode, where the file system folds them ------------------------------------


def test_case_twins_restore_on_a_case_sensitive_file_system(repo: Path) -> None:
    if folds_case(str(repo)):
        pytest.skip("this file system folds case")
    twins = crafted_checkpoint(
        repo,
        tree(
            repo,
            ("100644", b"xt_TCPMSS.c", blob(repo, "A\n")),
            ("100644", b"xt_tcpmss.c", blob(repo, "a\n")),
        ),
    )
    ckpt(repo, "restore", twins)
    assert (repo / "xt_TCPMSS.c").read_text() == "A\n"
    assert (repo / "xt_tcpmss.c").read_text() == "a\n"


@pytest.mark.mode("inline", reason="patches a function of this process")
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (b"README", b"readme"),
        ("\u00e9".encode(), "e\u0301".encode()),  # NFC and NFD of one letter
        ("\u00c9T\u00c9".encode(), "\u00e9t\u00e9".encode()),
    ],
    ids=repr,
)
def test_names_one_on_a_folding_file_system_are_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, first: bytes, second: bytes
) -> None:
    evil = crafted_checkpoint(
        repo,
        tree(repo, ("100644", first, blob(repo, "1\n")), ("100644", second, blob(repo, "2\n"))),
    )
    monkeypatch.setattr(tree_check, "folds_case", lambda directory: True)
    err = refuse_restore(repo, evil)
    assert "are one name on this file system" in err


@pytest.mark.mode("inline", reason="patches a function of this process")
def test_a_link_and_a_directory_differing_in_case_on_a_folding_file_system(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = crafted_checkpoint(
        repo, tree(repo, link(repo, b"S", str(outside.name)), dir_with(repo, b"s"))
    )
    monkeypatch.setattr(tree_check, "folds_case", lambda directory: True)
    refuse_restore(repo, evil, "'s'")


def test_folds_case_probes_the_directory_itself(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "Probe").write_text("x")
    expected = (tmp_path / "PROBE").exists()
    assert folds_case(str(tmp_path)) == expected
    assert folds_case(str(empty)) == expected  # probed with a file of its own ...
    assert list(empty.iterdir()) == []  # ... removed at once


def test_name_rules_match_gits() -> None:
    for name in DOTGIT_ALIASES:
        assert is_dotgit(name), name
    for name in [
        b".gitignore",
        b".github",
        b"git~2",
        b".git-x",
        b"git",
        b".gi",
        b"git~10",
        b"g.it",
    ]:
        assert not is_dotgit(name), name
    for name in [
        b".gitmodules",
        b".gitmodules::$DATA",
        b"GITMOD~4",
        b"gi7eb~12",
        "\u200c.gitmodules".encode(),
    ]:
        assert is_dotgitmodules(name), name
    for name in [b".gitmodulesx", b"gitmod~5", b"gi7eba~0", b"gi7eba", b".gitattributes"]:
        assert not is_dotgitmodules(name), name


# -- the writer: a component that is, or becomes, a link is never followed ------------------


def test_writer_never_follows_a_linked_directory(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    os.symlink(outside, root / "d")
    (root / "e").mkdir()
    os.symlink(outside, root / "e" / "f")
    with SafeWriter(str(root)) as writer:
        for rel in ("d/x", "d/new/x", "e/f/x"):
            with pytest.raises(UsageError, match="is a symbolic link"):
                writer.write(rel, b"pwned\n", 0o100644)
        with pytest.raises(UsageError, match="'d' is a symbolic link"):
            writer.remove("d/keep.txt")
        with pytest.raises(UsageError):
            writer.check_parents("e/f/keep.txt")
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_writer_replaces_a_link_it_writes_over_without_following_it(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    os.symlink(outside / "keep.txt", root / "f")
    with SafeWriter(str(root)) as writer:
        writer.write("f", b"mine\n", 0o100755)
    assert not (root / "f").is_symlink() and (root / "f").read_bytes() == b"mine\n"
    assert os.access(root / "f", os.X_OK)
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_writer_a_directory_swapped_for_a_link_midway(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    with SafeWriter(str(root)) as writer:
        writer.write("d/a", b"a\n", 0o100644)
        os.rename(root / "d", root / "moved")  # another process swaps d for a link
        os.symlink(outside, root / "d")
        writer.write("d/b", b"b\n", 0o100644)  # the open directory is still the real one
        writer.write("other/c", b"c\n", 0o100644)
        with pytest.raises(UsageError, match="'d' is a symbolic link"):
            writer.write("d/c", b"c\n", 0o100644)  # opened again: refused
    assert sorted(os.listdir(root / "moved")) == ["a", "b"]
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_apply_restore_refuses_a_plan_through_a_linked_directory(repo: Path, outside: Path) -> None:
    os.symlink(outside, repo / "d")
    grepo = GitRepo.discover(str(repo))
    oid = grepo.write_blob(b"pwned\n")
    plan = RestorePlan(
        writes=(
            Change("A", "a.txt", None, oid, 0, 0o100644),
            Change("A", "d/x", None, oid, 0, 0o100644),
        ),
        deletes=(Change("D", "d/keep.txt", oid, None, 0o100644, 0),),
        skipped=(),
    )
    with pytest.raises(UsageError, match="'d' is a symbolic link"):
        apply_restore(grepo, plan)
    assert not (repo / "a.txt").exists()  # refused before anything was written
    assert listing(outside) == {"keep.txt": b"keep\n"}


# -- every path that writes a checkpoint's tree ---------------------------------------------


def test_export_tree_checks_before_writing(repo: Path, tmp_path: Path, outside: Path) -> None:
    grepo = GitRepo.discover(str(repo))
    evil = tree(repo, link(repo, b"s", str(outside)), dir_with(repo, b"s"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(CorruptError, match="refusing checkpoint X: 's'"):
        export_tree(grepo, evil, str(scratch), label="X")
    assert list(scratch.iterdir()) == []
    good = tree(
        repo, link(repo, b"readme", "README.md"), ("100755", b"run", blob(repo, "#!/bin/sh\n"))
    )
    export_tree(grepo, good, str(scratch), label="X")
    assert os.readlink(scratch / "readme") == "README.md"
    assert os.access(scratch / "run", os.X_OK)
    assert (scratch / "src" / "app.py").read_text() == "print('hi')\n"
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_resume_restore_refuses_a_crafted_start(repo: Path, outside: Path) -> None:
    evil = crafted_checkpoint(
        repo, tree(repo, link(repo, b"s", "../outside"), dir_with(repo, b"s"))
    )
    before = listing(repo)
    result = ckpt(repo, "resume", "evil", "--restore", ok=False)
    assert result.exit_code == 6, result.output
    assert f"refusing checkpoint {evil}" in result.stderr and "'s'" in result.stderr
    assert listing(repo) == before
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_rollback_refuses_a_crafted_earlier_checkpoint(repo: Path, outside: Path) -> None:
    """A crafted candidate that asserts the failed file (so rollback tests it) is refused
    before any of its files is written, even to the scratch directory."""
    evil = crafted_checkpoint(
        repo,
        tree(repo, link(repo, b"s", str(outside)), dir_with(repo, b"s")),
        "t",
        "good@file_contains:model.py=GOOD",
    )
    write(repo / "model.py", "BAD\n")
    ckpt(repo, "create", "-t", "t", "--assert", "good@file_contains:model.py=GOOD")
    before = listing(repo)
    result = ckpt(repo, "resume", "t", ok=False)
    assert result.exit_code == 6, result.output
    assert f"refusing checkpoint {evil}" in result.stderr and "'s'" in result.stderr
    assert listing(repo) == before
    assert listing(outside) == {"keep.txt": b"keep\n"}


def test_a_subtree_met_twice_is_checked_at_each_depth(repo: Path) -> None:
    """Subtrees are read once by id, but a link's reach depends on where the subtree sits."""
    grepo = GitRepo.discover(str(repo))
    sub = tree(repo, link(repo, b"up", "../../.."), base=False)

    def nest(*names: bytes) -> Entry:
        entry: Entry = ("40000", names[-1], sub)
        for name in reversed(names[:-1]):
            entry = ("40000", name, tree(repo, entry, base=False))
        return entry

    check_tree(grepo, tree(repo, nest(b"a", b"b", b"c")), str(repo), "L")  # a/b/c/up: inside
    both = tree(repo, nest(b"a", b"b", b"c"), nest(b"z", b"w"))  # z/w/up: leaves the root
    with pytest.raises(CorruptError, match="'z/w/up' is a symbolic link leading outside"):
        check_tree(grepo, both, str(repo), "L")


# -- fetch: such trees are refused on arrival ----------------------------------------------


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote with one commit, and two clones of it (a, b)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    write(a / "README.md", "shared\n")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "initial")
    git(a, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(b))
    return remote, a, b


def test_fetch_refuses_a_crafted_tree_on_arrival(
    clones: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _remote, a, b = clones
    evil_tree = tree(a, link(a, b"s", "../outside"), dir_with(a, b"s"))
    crafted_checkpoint(a, evil_tree)
    ckpt(a, "push")  # the remote does not fsck what it receives
    result = ckpt(b, "fetch", ok=False)
    assert result.exit_code == 6, result.output
    err = result.stderr
    assert (
        evil_tree in err
        and "duplicateEntries" in err
        and "fetch.fsck.duplicateEntries=ignore" in err
    )
    assert len(err.strip().splitlines()) == 1
    assert git(b, "for-each-ref", "refs/agent", "refs/ckpt-remotes") == ""
    # a user who trusts the remote can let it in; restore still refuses the tree
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    trusted = subprocess.run(
        ["git", "-c", "fetch.fsck.duplicateEntries=ignore", "ckpt", "fetch"],
        cwd=b,
        env=env,
        capture_output=True,
        text=True,
    )
    assert trusted.returncode == 0, trusted.stderr
    refuse_restore(b, str(ckpt_json(b, "list", "evil")[0]["id"]), "'s'")
    assert not (tmp_path / "outside").exists()
