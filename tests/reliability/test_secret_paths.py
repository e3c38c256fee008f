"""Issue 9, item 2: no secret reaches the object store, by any input path, nor a remote.

Every token family the redactor knows (`redact_rules._RULES`, plus PEM blocks and the
values of secret-named environment variables) goes through every input path the CLI
has; then the trail is pushed to a bare remote, and no object of either store (loose
or packed) nor any commit message holds one of them. Files matching `secret_paths`
never give a snapshot new content: a tracked one keeps HEAD's blob, an untracked one
is left out, and restore and resume leave them as they are.

The fakes are built from pieces and a two-digit tag per input path, so a leak names
the path it came through and this file never holds a live-looking credential.
"""

from __future__ import annotations

import json
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write
from test_redact import MISSED_SHAPES

from git_agentckpt.api import Checkpointer
from git_agentckpt.contracts.engine import repo_identity
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.redact import DEFAULT_SECRET_PATHS, Redactor
from git_agentckpt.redact_rules import _RULES
from git_agentckpt.store.refs import TaskName

# ----------------------------------------------------------------------------------
# Fakes
# ----------------------------------------------------------------------------------

_SEED = "Qx7Lm2Pb9Kd3Wz5RvT8nY4hJ6cF1gS0uAe"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def body(tag: str, n: int, chars: str = ALNUM) -> str:
    """`n` characters of `chars`: the tag first, then a fixed mix holding digits."""
    return "".join(c for c in tag + _SEED * 4 if c in chars)[:n]


@dataclass(frozen=True)
class Fake:
    family: str  # the rule that must fire: `[REDACTED:<family>`
    text: str  # what goes into an input
    core: str  # what must never reach an object


def fakes(tag: str) -> list[Fake]:
    """One fake per token family (several for GitHub, Stripe, Slack, Google)."""
    assert len(tag) == 2 and tag.isdigit(), "two digits fit every token alphabet"
    out: list[Fake] = []

    def add(family: str, core: str, before: str = "", after: str = "") -> None:
        out.append(Fake(family, before + core + after, core))

    add("aws-key", "AK" + "IA" + body(tag, 16, UPPER))
    add("aws-secret-key", body(tag, 30) + "/+" + body(tag, 8), "aws_secret_access_key=")
    for kind in "pousr":  # ghp_ gho_ ghu_ ghs_ ghr_
        add("github-token", "gh" + kind + "_" + body(tag, 36))
    add("github-token", "github" + "_pat_" + body(tag, 22) + "_" + body(tag, 30))
    add("gitlab-token", "gl" + "pat-" + body(tag, 24))
    add("anthropic-key", "sk-" + "ant-api03-" + body(tag, 40))
    add("openai-key", "sk-" + "proj-" + body(tag, 40))
    add("stripe-key", "sk" + "_live_" + body(tag, 24))
    add("stripe-key", "rk" + "_test_" + body(tag, 24))
    add("slack-token", "xo" + "xb-" + "12345678" + tag + "-" + body(tag, 24))
    add("slack-token", "xa" + "pp-1-" + body(tag, 11) + "-" + body(tag, 20))
    hook = "T" + body(tag, 9, UPPER) + "/B" + body(tag, 9, UPPER) + "/" + body(tag, 24)
    add("slack-webhook", hook, "https://hooks.slack.com/services/")
    add("google-api-key", "AI" + "za" + body(tag, 35))
    add("google-oauth", "ya" + "29." + body(tag, 40))
    add("google-oauth", "GOC" + "SPX-" + body(tag, 28))
    add("huggingface-token", "h" + "f_" + body(tag, 34))
    add("npm-token", "np" + "m_" + body(tag, 36))
    add("pypi-token", "py" + "pi-AgEIcHlwaS5vcmc" + body(tag, 60))
    add("jwt", "ey" + "JhbGciOiJIUzI1NiJ9.ey" + "J" + body(tag, 20) + "." + body(tag, 30))
    add("assign", "SG." + body(tag, 22) + "." + body(tag, 20), "SENDGRID_KEY=")  # issue 26
    add("google-api-key", "AI" + "za" + body(tag, 35), "apikey", "xyz")  # glued to text
    add("bearer", "b" + tag + body(tag, 28), "Bearer ")
    add("url-userinfo", "pw" + tag + body(tag, 14), "https://deploy:", "@example.org/r.git")
    add("assign", "Pw" + tag + body(tag, 14), "DB_PASSWORD=")
    pem = "-----BEGIN " + "RSA PRIVATE KEY-----\n"
    add("private-key", "MIIEow" + tag + body(tag, 48), pem, "\n-----END RSA PRIVATE KEY-----")
    add("authorization", "Basic ZGVw" + tag + body(tag, 24), "Authorization: ")  # to line end
    name, value = env_fake(tag)
    add("env:" + name, value)
    return out


def env_fake(tag: str) -> tuple[str, str]:
    """A secret-named environment variable and its value: redacted as a known value."""
    return f"SVC_{tag}_TOKEN", "envval-" + tag + "-" + body(tag, 12)


def line(tag: str) -> str:
    """Every fake of `tag` in one string (the authorization header last)."""
    return " ; ".join(f.text for f in fakes(tag))


# every input path, with its own tag
PATHS = {
    "event input": "01",
    "event output": "02",
    "event data": "03",
    "event links": "04",
    "event top-level checkpoint": "05",
    "event top-level step": "06",
    "event actor (--actor and payload)": "07",
    "create -m": "08",
    "create --trigger": "09",
    "step done --output": "10",
    "task start --goal and step title": "11",
    "state update (create --state)": "12",
    "--assert specs": "13",
    "contract constraint text and command output (check)": "14",
    "recovery report (resume brief from an event)": "15",
    "confirm --restatement": "16",
    "trust store approval": "17",
}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for tag in PATHS.values():
        monkeypatch.setenv(*env_fake(tag))


# ----------------------------------------------------------------------------------
# Where secrets could be: every object, every message
# ----------------------------------------------------------------------------------


def _objects(git_dir: Path) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout


def _messages(git_dir: Path) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "log", "--all", "--format=%B"],
        capture_output=True,
        check=True,
    ).stdout


def _loose_objects_under(root: Path) -> bytes:
    """Raw content of every loose object below `root` (e.g. the shadow git dir)."""
    out = []
    for f in root.rglob("*"):
        if f.is_file() and len(f.parent.name) == 2 and len(f.name) == 38:
            out.append(zlib.decompress(f.read_bytes()))
    return b"\n".join(out)


def stores(repo: Path, remote: Path | None) -> dict[str, bytes]:
    where = {
        "local objects (loose and packed)": _objects(repo / ".git"),
        "local commit messages": _messages(repo / ".git"),
        "local .git/agent objects": _loose_objects_under(repo / ".git" / "agent"),
    }
    if remote is not None:
        where["remote objects"] = _objects(remote)
        where["remote commit messages"] = _messages(remote)
    return where


def leaks(where: dict[str, bytes], tags: dict[str, str]) -> list[str]:
    found = []
    for label, tag in tags.items():
        for fake in fakes(tag):
            for place, blob in where.items():
                if fake.core.encode() in blob:
                    found.append(f"{fake.family} via {label} in {place}")
    return found


def bare_remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    return remote


# ----------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------


def test_the_fakes_cover_every_rule_and_each_one_is_recognised() -> None:
    """A new rule in redact_rules needs a fake here; a fake of the wrong shape is caught."""
    assert {kind for kind, _ in _RULES} <= {f.family for f in fakes("00")}
    name, value = env_fake("00")
    r = Redactor(env={name: value})
    for f in fakes("00"):
        out = r.text("x " + f.text + " y")
        assert f.core not in out and "[REDACTED:" + f.family in out, f.family
    assert {f.family for f in fakes("00")} >= {"github-token"}
    assert sum(f.family == "github-token" for f in fakes("00")) == 6  # ghp gho ghu ghs ghr pat


CONTRACT = """\
constraints:
  - id: no-leak
    text: {text}
    severity: warn
    check: {{kind: command, argv: {argv}, timeout: 20}}
"""


def test_no_secret_reaches_any_object_by_any_input_path_nor_the_remote(
    repo: Path, tmp_path: Path, secret_env: None, person_at_terminal: None
) -> None:
    remote = bare_remote(tmp_path)
    p = {label: line(tag) for label, tag in PATHS.items()}
    # The contract file is a project file (snapshots store files as they are): keep it
    # out of the snapshot here, so that only the texts the tool derives from it count.
    write(repo / ".gitignore", "*.log\nbuild/\n.agent/contracts/constraints.yaml\n")
    argv = [
        "sh",
        "-c",
        "printf '%s\\n' \"$0\"; exit 1",
        p["contract constraint text and command output (check)"],
    ]
    write(
        repo / ".agent" / "contracts" / "constraints.yaml",
        CONTRACT.format(text=json.dumps(argv[3]), argv=json.dumps(argv)),
    )
    ck = Checkpointer.open(str(repo))
    TrustStore().approve(repo_identity(ck.repo), argv, note=p["trust store approval"])
    goal = p["task start --goal and step title"]
    ckpt(
        repo,
        "task",
        "start",
        "t",
        "--goal",
        goal,
        "--step",
        "s1:read " + goal,
        "--step",
        "s2:write",
    )
    payload = {
        "input": {"cmd": p["event input"]},
        "output": p["event output"],
        "note": p["event data"],
        "links": {"ticket": p["event links"]},
        "checkpoint": p["event top-level checkpoint"],
        "step": p["event top-level step"],
        "actor": {"session": p["event actor (--actor and payload)"]},
    }
    actor = fakes(PATHS["event actor (--actor and payload)"])[2].text  # a ghu_ token
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps(payload), "--actor", actor)
    state = {
        "summary": p["state update (create --state)"],
        "env": {"notes": p["state update (create --state)"]},
    }
    ckpt(
        repo,
        "create",
        "-t",
        "t",
        "-m",
        p["create -m"].replace("\n", " "),
        "--trigger",
        p["create --trigger"].replace("\n", " "),
        "--state",
        json.dumps(state),
        "--assert",
        "file_contains:README.md=" + p["--assert specs"].replace("\n", " "),
        "--assert",
        "command:echo " + fakes(PATHS["--assert specs"])[4].text,
    )
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(
        repo,
        "step",
        "done",
        "t",
        "s1",
        "--output",
        json.dumps({"summary": p["step done --output"]}),
    )
    assert ckpt(repo, "check", "t", "--json", ok=False).exit_code in (0, 1)
    ckpt(
        repo,
        "event",
        "t",
        "--type",
        "model.call",
        "--json",
        json.dumps({"output": p["recovery report (resume brief from an event)"]}),
    )
    out = ckpt(repo, "resume", "t", "--json", ok=False)
    assert out.exit_code == 0, out.output
    ckpt(repo, "confirm", "t", "--restatement", "-", ok=False, input=p["confirm --restatement"])
    ckpt(repo, "push", str(remote))

    where = stores(repo, remote)
    assert b"[REDACTED:" in where["remote objects"]  # the trail did travel, redacted
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/agent/reports/")
    found = leaks(where, PATHS)
    assert not found, "\n".join(sorted({x.split(" via ")[1] for x in found}))


def test_names_that_look_secret_are_refused_before_anything_is_written(
    repo: Path, secret_env: None
) -> None:
    token = fakes("21")[4].text  # ghu_...: a valid ref name and step id
    lower = "np" + "m_" + body("21", 36, "abcdefghijklmnopqrstuvwxyz0123456789")
    before = _objects(repo / ".git")
    for args in (
        ("task", "start", token, "--goal", "g"),
        ("create", "-t", token),
        ("event", token, "--type", "tool.call"),
        ("task", "start", "t", "--goal", "g", "--step", token + ":title"),
    ):
        result = ckpt(repo, *args, ok=False)
        assert result.exit_code == 2, (args, result.output)
        assert token not in result.output and "[REDACTED:github-token]" in result.output
    ckpt(repo, "task", "start", "ok", "--goal", "g", "--step", "s1:one")
    result = ckpt(repo, "event", "ok", "--type", lower, ok=False)
    assert result.exit_code == 2 and lower not in result.output
    result = ckpt(
        repo,
        "create",
        "-t",
        "ok",
        "--state",
        json.dumps({"steps": [{"id": token, "title": "x"}]}),
        ok=False,
    )
    assert result.exit_code == 2 and token not in result.output
    assert git(repo, "for-each-ref", "refs/agent/", "--format=%(refname)").count(token) == 0
    blob = _objects(repo / ".git")
    assert token.encode() not in blob and lower.encode() not in blob
    assert len(blob) > len(before)  # task `ok` was written: the check above is not empty


def test_a_union_merge_of_event_logs_redacts_the_remote_url(repo: Path) -> None:
    ck = Checkpointer.open(str(repo))
    ck.event("t", "tool.call", {"output": "one"})
    base = git(repo, "rev-parse", "refs/agent/events/t")
    ck.event("t", "tool.call", {"output": "ours"})
    ours = git(repo, "rev-parse", "refs/agent/events/t")
    line_ = json.dumps(
        {
            "v": 1,
            "id": "01J0000000000000000000THRS",
            "seq": 2,
            "ts": "2026-01-01T00:00:00.000Z",
            "task": "t",
            "type": "tool.call",
            "actor": {},
        }
    )
    theirs = git(
        repo,
        "commit-tree",
        git(repo, "hash-object", "-t", "tree", "/dev/null"),
        "-p",
        base,
        "-m",
        "theirs\n\n" + line_,
    )
    secret = fakes("22")
    url = "https://deploy:" + secret[-4].core + "@example.org/" + secret[4].text + ".git"
    commit, gained = ck.log.union_commit(TaskName("t"), ours, theirs, url)
    assert gained == 1
    message = git(repo, "log", "-1", "--format=%B", commit)
    assert secret[-4].core not in message and secret[4].text not in message
    assert "[REDACTED:" in message


# -- secret_paths: tracked files keep HEAD's blob, untracked ones stay out ---------------

NEW_DEFAULTS = (
    ".envrc",
    "infra/prod.tfvars",
    "gcloud/application_default_credentials.json",
    ".kube/config",
    "home/dev/.kube/config",
    ".npmrc",
    ".pypirc",
)


def _tree_blob(repo: Path, rev: str, path: str) -> str | None:
    out = git(repo, "ls-tree", rev, "--", path)
    return out.split()[2] if out else None


def test_tracked_secret_file_keeps_heads_blob_and_is_never_restored_or_drift(
    repo: Path, tmp_path: Path, secret_env: None, person_at_terminal: None
) -> None:
    remote = bare_remote(tmp_path)
    write(repo / ".env", "API_URL=https://example.org\n")
    write(repo / "deploy" / ".npmrc", "registry=https://registry.example.org/\n")
    git(repo, "add", "-f", ".env", "deploy/.npmrc")
    git(repo, "commit", "-qm", "tracked config")
    head_env = _tree_blob(repo, "HEAD", ".env")
    # staged by the user but never committed: its blob is in the local store (git put
    # it there), but no snapshot may refer to it, so it is never pushed
    staged = fakes("30")
    write(repo / ".env.local", line("30"))
    git(repo, "add", "-f", ".env.local")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")

    untracked = fakes("31")
    for i, path in enumerate(NEW_DEFAULTS):
        write(repo / path, untracked[i].text + "\n")
    edited = line("32")
    write(repo / ".env", edited)
    write(repo / "deploy" / ".npmrc", "//registry.example.org/:_authToken=" + line("33"))
    write(repo / "src" / "app.py", "print('changed')\n")
    made = ckpt_json(repo, "create", "-t", "t", "-m", "edited")
    assert _tree_blob(repo, made["commit"], ".env") == head_env
    assert _tree_blob(repo, made["commit"], ".env.local") is None
    for path in NEW_DEFAULTS:
        assert _tree_blob(repo, made["commit"], path) is None, path

    # restore an older checkpoint: source comes back, the edited .env stays as it is
    result = ckpt_json(repo, "restore", "t~1")
    assert "src/app.py" in result["written"]
    assert (repo / ".env").read_text() == edited
    assert (repo / "deploy" / ".npmrc").read_text().endswith(line("33"))
    assert ".env" not in result["written"] + result["deleted"]
    # a checkpoint that holds another .env (from a clone whose secret_paths did not
    # name it): restore writes the rest, never that .env
    others = [p for p in DEFAULT_SECRET_PATHS if p not in (".env", "*.env")]
    write(repo / ".git" / "info" / "exclude", ".agent/ckpt.toml\n")  # in no snapshot
    write(repo / ".agent" / "ckpt.toml", f"[snapshot]\nsecret_paths = {json.dumps(others)}\n")
    write(repo / ".env", "FROM=another clone\n")
    other = ckpt_json(repo, "create", "-t", "t", "-m", "another clone's view")
    assert _tree_blob(repo, other["commit"], ".env") != head_env
    (repo / ".agent" / "ckpt.toml").unlink()
    write(repo / ".env", edited)
    write(repo / "src" / "app.py", "print('changed again')\n")
    result = ckpt_json(repo, "restore", other["commit"])
    assert result["secret_paths_left"] == [".env"]
    assert (repo / ".env").read_text() == edited
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    # resume from it: its .env is no drift, left as it is, and the brief says so
    out = ckpt(repo, "resume", "t", "--from", other["commit"], "--json", ok=False)
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["verify"]["source_drift"] == []
    assert report["verify"]["secret_paths_left"] == [".env"]
    kept = [f for f in report["brief"]["recovery"]["files"] if f["why"] == "secret_paths"]
    assert kept == [{"path": ".env", "action": "kept", "why": "secret_paths"}]
    assert (repo / ".env").read_text() == edited
    ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    ckpt(repo, "create", "-t", "t", "-m", "after the restore")

    # resume: an edited secret file is no drift; with --restore it is left untouched
    write(repo / ".env", edited + "\nMORE=" + line("34"))
    out = ckpt(repo, "resume", "t", "--json", ok=False)
    assert out.exit_code == 0, out.output
    verify = json.loads(out.stdout)["verify"]
    assert verify["source_drift"] == [] and verify["clean"]
    assert verify["secret_paths_left"] == []  # the tip holds HEAD's .env: no difference
    ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    write(repo / "src" / "app.py", "print('drifted')\n")
    out = ckpt(repo, "resume", "t", "--json", ok=False)
    assert out.exit_code == 10
    paths = [d["path"] for d in json.loads(out.stdout)["verify"]["source_drift"]]
    assert paths == ["src/app.py"]
    out = ckpt(repo, "resume", "t", "--restore", "--json", ok=False)
    assert out.exit_code == 0, out.output
    assert (repo / ".env").read_text().endswith(line("34"))
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"

    ckpt(repo, "push", str(remote))
    tags = {
        "edited .env": "32",
        "edited tracked .npmrc": "33",
        "edited .env again": "34",
        "untracked new defaults": "31",
    }
    assert leaks(stores(repo, remote), tags) == []
    assert leaks({"remote": _objects(remote)}, {"staged .env.local": "30"}) == []
    assert staged  # (the local store holds it: the user's own `git add` wrote it)


def test_pins_follow_head_untracking_and_gitignore_reincludes(
    repo: Path, tmp_path: Path, secret_env: None, person_at_terminal: None
) -> None:
    remote = bare_remote(tmp_path)
    write(repo / ".env", "V=1\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-qm", "v1")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / ".env", line("40"))
    first = ckpt_json(repo, "create", "-t", "t")
    assert _tree_blob(repo, first["commit"], ".env") == _tree_blob(repo, "HEAD", ".env")
    # HEAD moves: the user commits a new (harmless) version, then edits it again
    write(repo / ".env", "V=2\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-qm", "v2")
    write(repo / ".env", line("41"))
    second = ckpt_json(repo, "create", "-t", "t")
    assert _tree_blob(repo, second["commit"], ".env") == _tree_blob(repo, "HEAD", ".env")
    # untracked by the user: left out
    git(repo, "rm", "-q", "--cached", ".env")
    git(repo, "commit", "-qm", "untrack .env")
    third = ckpt_json(repo, "create", "-t", "t")
    assert _tree_blob(repo, third["commit"], ".env") is None
    # a .gitignore that re-includes a secret path outranks the private excludes: git
    # reads the file, but the snapshot still leaves it out
    write(repo / ".gitignore", "*.log\nbuild/\n!.env.prod\n")
    write(repo / ".env.prod", line("42"))
    fourth = ckpt_json(repo, "create", "-t", "t")
    assert _tree_blob(repo, fourth["commit"], ".env.prod") is None
    assert _tree_blob(repo, fourth["commit"], ".gitignore") is not None
    ckpt(repo, "push", str(remote))
    tags = {"edit of v1": "40", "edit of v2": "41", "re-included .env.prod": "42"}
    where = stores(repo, remote)
    local = where.pop("local objects (loose and packed)")
    assert leaks(where, tags) == []
    assert leaks({"local": local}, {"edit of v1": "40", "edit of v2": "41"}) == []


@pytest.mark.parametrize("path", MISSED_SHAPES)  # issue 26, item 13
def test_a_secret_file_of_each_shape_stays_out_of_the_store_and_the_remote(
    repo: Path, tmp_path: Path, path: str
) -> None:
    tag = str(60 + MISSED_SHAPES.index(path))
    remote = bare_remote(tmp_path)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / path, line(tag) + "\n")
    write(repo / "src" / "app.py", "print('changed')\n")  # the snapshot has news
    made = ckpt_json(repo, "create", "-t", "t")
    assert _tree_blob(repo, made["commit"], "src/app.py") is not None
    assert _tree_blob(repo, made["commit"], path) is None
    ckpt(repo, "push", str(remote))
    assert git(remote, "rev-parse", "refs/agent/checkpoints/t") == made["commit"]
    assert leaks(stores(repo, remote), {path: tag}) == []


def test_an_unborn_branch_leaves_a_staged_secret_out(tmp_path: Path, secret_env: None) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    write(root / "a.txt", "a\n")
    write(root / ".env", line("43"))
    git(root, "add", "-A")
    git(root, "add", "-f", ".env")
    ckpt(root, "task", "start", "t", "--goal", "g")
    made = ckpt_json(root, "create", "-t", "t")
    assert _tree_blob(root, made["commit"], "a.txt") is not None
    assert _tree_blob(root, made["commit"], ".env") is None


PROTECT = """\
constraints:
  - id: config-frozen
    text: Nothing under config/ changes
    severity: block
    check: {kind: protected_paths, paths: ["config/**"]}
"""


def test_check_still_sees_an_edited_tracked_secret_file_under_a_protected_path(
    repo: Path,
) -> None:
    write(repo / ".agent" / "contracts" / "constraints.yaml", PROTECT)
    write(repo / "config" / ".env", "MODE=dev\n")
    git(repo, "add", "-f", "-A")
    git(repo, "commit", "-qm", "config")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    assert ckpt(repo, "check", "t").exit_code == 0
    write(repo / "config" / ".env", "MODE=prod\nEXTRA=1\n")
    result = ckpt(repo, "check", "t", "--json", ok=False)
    assert result.exit_code == 1, result.output
    assert "config-frozen" in result.output


def test_a_hex_secret_in_links_is_still_redacted_when_it_is_a_known_value(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object ids skip the shape rules (no rule starts with a hex digit), never the
    known values: an old-style 40-hex token in the environment is still caught."""
    hexed = "0f3a9c" + "5d1e7b2c4a6f8e0d9c1b3a5f7e9d2c4b6a8f"
    monkeypatch.setenv("DEPLOY_TOKEN", hexed)
    ck = Checkpointer.open(str(repo))
    oid = git(repo, "rev-parse", "HEAD")
    ev = ck.event("t", "tool.call", {"checkpoint": hexed, "links": {"commit": oid}})
    assert ev.links == {"checkpoint": "[REDACTED:env:DEPLOY_TOKEN]", "commit": oid}
    assert hexed.encode() not in _objects(repo / ".git")


def test_a_trigger_cannot_forge_another_trailer(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = ckpt_json(repo, "create", "-t", "t", "--trigger", "manual\nKind: light\nSeq: 99")
    body = git(repo, "log", "-1", "--format=%B", made["commit"])
    assert "\nKind: full\n" in body and "\nKind: light" not in body
    assert made["kind"] == "full"
    assert ckpt_json(repo, "show", made["commit"])["checkpoint"]["kind"] == "full"


def test_a_notes_merge_from_a_remote_whose_name_holds_a_token_stores_no_token(
    tmp_path: Path,
) -> None:
    """The merge commit of diverged notes names the remote: redacted like everything else."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
    token = token[:40]
    remote = tmp_path / f"{token}.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    (a / "f").write_text("x\n")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "initial")
    git(a, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(tmp_path, "clone", "-q", str(remote), str(b))
    ckpt(a, "task", "start", "ta", "--goal", "a")
    ckpt(a, "push", str(remote))
    ckpt(b, "task", "start", "tb", "--goal", "b")  # b's state notes diverge from a's
    fetched = ckpt_json(b, "fetch", str(remote))
    actions = {r["ref"]: r["action"] for r in fetched["fetched"]}
    assert actions["refs/notes/agent/state"] == "merged"
    messages = git(b, "log", "--format=%B", "refs/notes/agent/state")
    assert "git ckpt: merge refs/notes/agent/state from" in messages
    assert token not in messages
    reflog = (
        (b / ".git" / "logs" / "refs" / "notes" / "agent" / "state").read_text(errors="replace")
        if (b / ".git" / "logs" / "refs" / "notes" / "agent" / "state").exists()
        else ""
    )
    assert token not in reflog
