"""Issue 26, item 1: `git replace` never changes what `git ckpt` shows of a trail.

`git replace X Y` makes plain git show Y wherever X is read. Every git `git ckpt` runs
ignores replacements (`GIT_NO_REPLACE_OBJECTS=1`; libgit2 applies none), so `log`,
`export` and `timeline` show the record as stored; `verify` names each replacement of a
trail object (`replaced-object`), and a server with `hooks install --server` refuses a
push of one. The attacks are plain git: `hash-object`, `git replace`, `git push`.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git
from helpers import ckpt, ckpt_json
from push_helpers import run_git
from test_server_hooks import assert_refused_in_full, client, served  # noqa: F401
from verify_attacks import build_trail, kinds, raw_commit, verify

FORGED = '"n":666'


def forge_event(repo: Path) -> tuple[str, str]:
    """A copy of the commit of the event `{"n": 1}` with the data edited (the log's chain
    left as it is), put in its place with `git replace`: (original, forgery)."""
    log = git(repo, "rev-list", "--first-parent", "refs/agent/events/t").split()
    original = next(c for c in log if '"data":{"n":1}' in raw_commit(repo, c)[1])
    head, message = raw_commit(repo, original)
    body = head + "\n\n" + message.replace('"n":1', FORGED)
    forged = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=body)
    git(repo, "replace", original, forged)
    assert FORGED in git(repo, "log", "--format=%B", "refs/agent/events/t")  # plain git: forged
    return original, forged


def test_a_replaced_event_is_never_shown_and_verify_names_it(repo: Path, tmp_path: Path) -> None:
    build_trail(repo)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    ckpt(repo, "push", str(remote))  # a witness and a remote to verify against
    original, forged = forge_event(repo)

    logged = ckpt(repo, "log", "t", "--json").stdout
    assert FORGED not in logged and '"data":{"n":1}' in logged
    out = tmp_path / "export"
    ckpt(repo, "export", "t", "--to", str(out))
    exported = (out / "tasks" / "t" / "events.jsonl").read_text()
    assert exported == logged
    page = tmp_path / "timeline.html"
    ckpt(repo, "timeline", "t", "--html", str(page))
    assert FORGED.replace('"', "&quot;") not in page.read_text() and FORGED not in page.read_text()

    for args in ((), ("--against", str(remote))):  # the witness file `push` wrote, the remote
        code, doc = verify(repo, *args)
        assert code == 6 and "replaced-object" in kinds(doc), (args, doc)
        assert doc["compared_with"], doc
        (problem,) = [p for p in doc["problems"] if p["kind"] == "replaced-object"]
        assert problem["where"] == f"refs/replace/{original}"
        assert problem["detail"].startswith(
            f"plain git shows {forged[:12]} instead of the trail's commit {original[:12]}"
        )
    git(repo, "replace", "-d", original)
    assert verify(repo)[0] == 0


def test_a_replaced_snapshot_file_is_named_and_never_restored(repo: Path) -> None:
    build_trail(repo)
    blob = git(repo, "rev-parse", "refs/agent/checkpoints/t:t-b.txt")
    forged = git(repo, "hash-object", "-w", "--stdin", input="forged\n")
    git(repo, "replace", blob, forged)
    assert git(repo, "show", "refs/agent/checkpoints/t:t-b.txt") == "forged"  # plain git
    code, doc = verify(repo)
    assert code == 6
    (problem,) = [p for p in doc["problems"] if p["kind"] == "replaced-object"]
    assert f"instead of the trail's blob {blob[:12]}" in problem["detail"]
    (repo / "t-b.txt").unlink()
    ckpt(repo, "restore", "t")
    assert (repo / "t-b.txt").read_text() == "second\n"
    # a replacement of the user's own history (the task's baseline) is not the trail's
    base = git(repo, "rev-parse", "HEAD")
    other = git(repo, "commit-tree", git(repo, "rev-parse", "HEAD^{tree}"), "-m", "other")
    git(repo, "replace", base, other)
    assert [p["where"] for p in verify(repo)[1]["problems"]] == [f"refs/replace/{blob}"]


def test_a_server_refuses_a_replacement_of_its_trail(
    client: tuple[Path, Path, str],  # noqa: F811
) -> None:
    repo, remote, _ = client
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps({"n": 1}))
    ckpt(repo, "push")
    original, _ = forge_event(repo)
    pushed = run_git(repo, "push", "origin", "refs/replace/*:refs/replace/*")
    why = "it would make plain git show "
    assert_refused_in_full(pushed, f"refs/replace/{original}", why)
    assert "fix: the trail on this server is append-only: a refs/replace/ ref" in pushed.stderr
    assert git(remote, "for-each-ref", "refs/replace/") == ""
    # the user's own history may still be replaced there (the commit the task began from)
    base = git(repo, "rev-parse", "HEAD")
    other = git(repo, "commit-tree", git(repo, "rev-parse", "HEAD^{tree}"), "-m", "other")
    git(repo, "replace", base, other)
    pushed = run_git(repo, "push", "origin", f"refs/replace/{base}:refs/replace/{base}")
    assert pushed.returncode == 0, pushed.stderr


def test_a_server_that_took_a_replacement_still_shows_the_record(
    repo: Path, tmp_path: Path
) -> None:
    """A server without the hook (or from before it) took `refs/replace/*`: its reading
    commands show the stored record and its `verify` names the replacement."""
    build_trail(repo)
    remote = tmp_path / "srv.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    ckpt(repo, "push", str(remote))
    original, _ = forge_event(repo)
    git(repo, "push", "-q", str(remote), "refs/replace/*:refs/replace/*")
    assert FORGED in git(remote, "log", "--format=%B", "refs/agent/events/t")
    logged = ckpt(remote, "log", "t", "--json").stdout
    assert FORGED not in logged and '"data":{"n":1}' in logged
    code, doc = verify(remote)
    assert code == 6 and doc["ok"] is False
    assert [p["where"] for p in doc["problems"]] == [f"refs/replace/{original}"]


def test_a_replaced_checkpoint_commit_is_never_shown(repo: Path) -> None:
    """`list` and `show` read the chain through libgit2, which never applied replacements
    (this part held before issue 26 too); `verify` names the replacement."""
    build_trail(repo)
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t")
    head, message = raw_commit(repo, tip)
    forged = git(
        repo,
        "hash-object",
        "-t",
        "commit",
        "-w",
        "--stdin",
        input=head + "\n\n" + message.replace("two", "forged", 1),
    )
    git(repo, "replace", tip, forged)
    assert "forged" in git(repo, "log", "-1", "--format=%s", "refs/agent/checkpoints/t")
    shown = ckpt_json(repo, "show", "t")["checkpoint"]
    assert shown["commit"] == tip and "forged" not in shown["subject"]
    assert "forged" not in ckpt(repo, "list", "t").stdout
    assert [p["where"] for p in verify(repo)[1]["problems"]] == [f"refs/replace/{tip}"]
