"""`git ckpt export TASK|CKPT --to DIR` and `verify --dir`: the trail
as plain files, deterministic, without secrets; a working tree checked against it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, real_ckpt, write

README_V2 = "hello\nmore\n"


def small_trail(repo: Path) -> list[dict[str, Any]]:
    """task t: start (checkpoint 1), README changed and new.txt added (2), new.txt
    deleted, run.sh added executable and a link (3). The checkpoints, oldest first."""
    ckpt(repo, "init")  # .agent/ckpt.toml and the contract templates
    ckpt(repo, "task", "start", "t", "--goal", "export me", "--step", "s1:First")
    write(repo / "README.md", README_V2)
    write(repo / "new.txt", "new\n")
    ckpt(repo, "create", "-t", "t", "-m", "two")
    (repo / "new.txt").unlink()
    write(repo / "run.sh", "#!/bin/sh\necho run\n")
    os.chmod(repo / "run.sh", 0o755)
    os.symlink("run.sh", repo / "go")
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", '{"input": {"cmd": "ls"}}')
    ckpt(repo, "create", "-t", "t", "-m", "three")
    return list(reversed(ckpt_json(repo, "list", "t")))


def export(repo: Path, target: str, to: Path) -> Any:
    return ckpt_json(repo, "export", target, "--to", str(to))


def manifest(out: Path, position: int) -> dict[str, Any]:
    [folder] = (out / "tasks" / "t" / "checkpoints").glob(f"{position:04d}-*")
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return data


def all_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_manifest_of_a_small_trail(repo: Path, tmp_path: Path) -> None:
    chain = small_trail(repo)
    out = tmp_path / "out"
    result = export(repo, "t", out)
    assert result["checkpoints"] == 3 and result["scope"] == "task"
    two, three = manifest(out, 2), manifest(out, 3)
    assert two["checkpoint"] == chain[1]["id"] and two["commit"] == chain[1]["commit"]
    assert two["parent"] == {"checkpoint": chain[0]["id"], "commit": chain[0]["commit"]}
    assert two["compared_with"] == {"commit": chain[0]["commit"], "what": "parent"}
    assert (two["task"], two["kind"], two["trigger"], two["position"]) == ("t", "full", "manual", 2)
    assert two["tree"] == git(repo, "rev-parse", chain[1]["commit"] + "^{tree}")
    assert two["time"].endswith("Z") and isinstance(two["time_unix"], int)
    by_path = {f["path"]: f for f in two["files"]}
    assert by_path["README.md"] == {
        "git_blob": git(repo, "rev-parse", f"{chain[1]['commit']}:README.md"),
        "mode": "100644",
        "path": "README.md",
        "sha256": sha(README_V2.encode()),
        "size": len(README_V2),
        "status": "modified",
    }
    assert {p: f["status"] for p, f in by_path.items() if not p.startswith(".agent/")} == {
        ".gitignore": "unchanged",
        "README.md": "modified",
        "new.txt": "added",
        "src/app.py": "unchanged",
    }
    statuses = {f["path"]: f["status"] for f in three["files"] if not f["path"].startswith(".a")}
    assert statuses == {
        ".gitignore": "unchanged",
        "README.md": "unchanged",
        "go": "added",
        "new.txt": "deleted",
        "run.sh": "added",
        "src/app.py": "unchanged",
    }
    files3 = {f["path"]: f for f in three["files"]}
    assert files3["new.txt"] == {"path": "new.txt", "status": "deleted"}
    assert files3["run.sh"]["mode"] == "100755"
    assert files3["go"]["mode"] == "120000" and files3["go"]["sha256"] == sha(b"run.sh")
    assert three["counts"] == {
        "added": 2,
        "deleted": 1,
        "modified": 0,
        "unchanged": len(three["files"]) - 3,
        "secret": 0,
    }
    paths = [f["path"] for f in three["files"]]
    assert paths == sorted(paths)
    # the first checkpoint compares with the baseline, the user's HEAD
    first = manifest(out, 1)
    assert first["parent"] is None
    assert first["compared_with"] == {"commit": git(repo, "rev-parse", "HEAD"), "what": "baseline"}
    folder = next((out / "tasks/t/checkpoints").glob("0003-*"))
    assert folder.name == f"0003-{chain[2]['id']}"
    state = json.loads((folder / "task_state.json").read_text())
    assert state["goal"] == "export me" and state["task"] == "t"
    assertions = json.loads((folder / "assertions.json").read_text())
    assert assertions == {"v": 1, "checkpoint": chain[2]["id"], "assertions": []}
    index = json.loads((out / "export.json").read_text())
    listed = index["tasks"][0]["checkpoints"]
    assert [c["checkpoint"] for c in listed] == [c["id"] for c in chain]
    assert any("sha256sum -c SHA256SUMS" in line for line in index["how_to_check"])
    contracts = sorted(p.name for p in (out / "tasks/t/contracts").iterdir())
    assert contracts == sorted(p.name for p in (repo / ".agent/contracts").iterdir())
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=out)
    assert check.returncode == 0


def test_events_jsonl_is_log_json(repo: Path, tmp_path: Path) -> None:
    small_trail(repo)
    export(repo, "t", tmp_path / "out")
    exported = (tmp_path / "out/tasks/t/events.jsonl").read_text()
    assert exported == ckpt(repo, "log", "t", "--json").stdout
    assert '"type":"tool.call"' in exported


def test_two_exports_are_byte_identical(repo: Path, tmp_path: Path) -> None:
    small_trail(repo)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    export(repo, "t", tmp_path / "a")
    (tmp_path / "b").mkdir()  # an empty directory is a valid target too
    export(repo, "t", tmp_path / "b")
    a, b = all_files(tmp_path / "a"), all_files(tmp_path / "b")
    assert len(a) >= 14 and a == b
    assert not (tmp_path / "a.partial").exists()


def test_one_checkpoint_is_exported_alone(repo: Path, tmp_path: Path) -> None:
    chain = small_trail(repo)
    result = export(repo, chain[1]["id"], tmp_path / "one")
    assert result["scope"] == "checkpoint" and result["checkpoints"] == 1
    folders = [p.name for p in (tmp_path / "one/tasks/t/checkpoints").iterdir()]
    assert folders == [f"0002-{chain[1]['id']}"]
    assert not (tmp_path / "one/tasks/t/events.jsonl").exists()
    # the same folder as in the whole export, byte for byte
    export(repo, "t", tmp_path / "all")
    assert all_files(tmp_path / "one/tasks/t/checkpoints") == {
        k: v
        for k, v in all_files(tmp_path / "all/tasks/t/checkpoints").items()
        if k.startswith("0002-")
    }


def test_a_target_that_is_not_empty_is_refused(repo: Path, tmp_path: Path) -> None:
    small_trail(repo)
    full = tmp_path / "full"
    write(full / "keep.txt", "mine\n")
    refused = ckpt(repo, "export", "t", "--to", str(full), ok=False)
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1 and "is not empty" in refused.stderr
    assert os.listdir(full) == ["keep.txt"] and not (tmp_path / "full.partial").exists()
    write(tmp_path / "afile", "x\n")
    refused = ckpt(repo, "export", "t", "--to", str(tmp_path / "afile"), ok=False)
    assert refused.exit_code == 2 and "not a directory" in refused.stderr


def test_a_secret_never_leaves_with_its_content(repo: Path, tmp_path: Path) -> None:
    token = "ghp_" + "Z" * 36
    # tracked secrets: snapshots keep HEAD's blob (git/secret_files.py), export never does
    write(repo / ".env", f"API_TOKEN={token}\n")
    write(repo / ".agent/contracts/secrets.json", '{"password": "hunter22hunter"}\n')
    git(repo, "add", "-f", ".env", ".agent/contracts/secrets.json")
    git(repo, "commit", "-qm", "secrets, committed by mistake")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / "deploy.pem", "-----BEGIN PRIVATE KEY-----\nsecretkeybytes\n")  # untracked
    write(repo / ".agent/contracts/notes.md", "plain\n")
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps({"output": token}))
    ckpt(repo, "create", "-t", "t", "-m", "with secrets around")
    out = tmp_path / "out"
    export(repo, "t", out)
    last = manifest(out, 2)
    env = next(f for f in last["files"] if f["path"] == ".env")
    assert env == {"mode": "100644", "path": ".env", "secret": True, "status": "unchanged"}
    contract_secret = next(f for f in last["files"] if f["path"].endswith("secrets.json"))
    assert "sha256" not in contract_secret and contract_secret["secret"] is True
    assert last["counts"]["secret"] == 2
    assert not any(f["path"] == "deploy.pem" for f in last["files"])  # never snapshotted
    assert (out / "tasks/t/contracts/notes.md").exists()
    assert not (out / "tasks/t/contracts/secrets.json").exists()
    env_blob = (repo / ".env").read_bytes()
    everything = b"".join(all_files(out).values())
    for needle in (token.encode(), b"hunter22hunter", b"secretkeybytes", sha(env_blob).encode()):
        assert needle not in everything


def test_verify_dir_on_the_restored_checkpoint(repo: Path, tmp_path: Path) -> None:
    chain = small_trail(repo)
    out = tmp_path / "out"
    export(repo, "t", out)
    write(repo / "src/app.py", "print('changed')\n")
    write(repo / "stray.txt", "stray\n")
    ckpt(repo, "restore", chain[1]["id"])
    passed = ckpt(repo, "verify", "--dir", str(out), "--checkpoint", chain[1]["id"])
    assert "matches" in passed.stdout
    # the last checkpoint is the default; the tree is at the second one: go, run.sh extra,
    # new.txt missing
    differs = ckpt(repo, "verify", "--dir", str(out), ok=False)
    assert differs.exit_code == 1
    ckpt(repo, "restore", chain[2]["id"])
    ckpt(repo, "verify", "--dir", str(out))
    write(repo / "README.md", "edited\n")  # modified
    (repo / "src/app.py").unlink()  # missing
    write(repo / "extra.txt", "extra\n")  # extra
    write(repo / "debug.log", "ignored by .gitignore\n")  # never counts
    write(repo / ".env", "TOKEN=x\n")  # a secret path: restore never writes it either
    failed = ckpt(repo, "verify", "--dir", str(out), ok=False)
    assert failed.exit_code == 1
    lines = failed.stdout.splitlines()
    assert lines[0].split()[:2] == ["modified", "README.md"]
    assert [line.split()[:2] for line in lines[1:3]] == [
        ["extra", "extra.txt"],
        ["missing", "src/app.py"],
    ]
    assert "differs in 3 file(s)" in lines[-1]
    as_json = json.loads(ckpt(repo, "verify", "--dir", str(out), "--json", ok=False).stdout)
    assert as_json["ok"] is False and as_json["checkpoint"] == chain[2]["id"]
    assert {(d["kind"], d["path"]) for d in as_json["differences"]} == {
        ("modified", "README.md"),
        ("missing", "src/app.py"),
        ("extra", "extra.txt"),
    }


def test_verify_dir_types_modes_and_a_plain_copy(repo: Path, tmp_path: Path) -> None:
    chain = small_trail(repo)
    out = tmp_path / "out"
    export(repo, "t", out)
    plain = tmp_path / "plain"  # a copy outside any repository, .gitignore still read
    shutil.copytree(repo, plain, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    write(plain / "build/x.o", "ignored\n")
    ckpt(plain, "verify", "--dir", str(out))
    os.chmod(plain / "run.sh", 0o644)
    (plain / "go").unlink()
    write(plain / "go", "run.sh")  # a file where the checkpoint has a link
    failed = ckpt(plain, "verify", "--dir", str(out), "--json", ok=False)
    kinds = {(d["kind"], d["path"]) for d in json.loads(failed.stdout)["differences"]}
    assert kinds == {("type", "go"), ("mode", "run.sh")}
    assert chain[2]["id"] in failed.stdout


def test_verify_dir_refuses_a_changed_manifest(repo: Path, tmp_path: Path) -> None:
    small_trail(repo)
    out = tmp_path / "out"
    export(repo, "t", out)
    path = next((out / "tasks/t/checkpoints").glob("0003-*")) / "manifest.json"
    path.write_text(path.read_text().replace('"status": "added"', '"status": "addeD"', 1))
    refused = ckpt(repo, "verify", "--dir", str(out), ok=False)
    assert refused.exit_code == 6 and "SHA256SUMS" in refused.stderr
    unknown = ckpt(repo, "verify", "--dir", str(out), "--checkpoint", "01ZZZ", ok=False)
    assert unknown.exit_code == 3


def test_a_killed_export_leaves_a_folder_that_says_so(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_trail(repo)
    out = tmp_path / "out"
    with monkeypatch.context() as m:  # the installed command, killed after its third file
        m.setenv("GIT_CKPT_CRASH_AT", "export.write@3")
        killed = real_ckpt(repo, "export", "t", "--to", str(out))
    assert killed.returncode == 128 + signal.SIGKILL, killed.stderr  # git reports the death
    partial = tmp_path / "out.partial"
    assert not out.exists() and (partial / "INCOMPLETE").exists()
    assert "interrupted" in (partial / "INCOMPLETE").read_text()
    again = ckpt(repo, "export", "t", "--to", str(out), ok=False)
    assert again.exit_code == 2 and "out.partial exists" in again.stderr
    refused = ckpt(repo, "verify", "--dir", str(partial), ok=False)
    assert refused.exit_code == 6 and "incomplete" in refused.stderr
    shutil.rmtree(partial)
    export(repo, "t", out)
    assert not partial.exists() and not (out / "INCOMPLETE").exists()


def test_verify_dir_follows_git_end_of_line_conversion(repo: Path, tmp_path: Path) -> None:
    write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    write(repo / "notes.txt", "one\ntwo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "crlf in the work tree")
    (repo / "notes.txt").unlink()
    git(repo, "checkout", "--", "notes.txt")  # git writes CRLF; the blob holds LF
    assert (repo / "notes.txt").read_bytes() == b"one\r\ntwo\r\n"
    ckpt(repo, "task", "start", "t", "--goal", "g")
    out = tmp_path / "out"
    export(repo, "t", out)
    entry = next(f for f in manifest(out, 1)["files"] if f["path"] == "notes.txt")
    assert entry["sha256"] == sha(b"one\ntwo\n")  # the stored content
    ckpt(repo, "verify", "--dir", str(out))  # the bytes differ only by git's conversion
    write(repo / "notes.txt", "one\r\nTWO\r\n")
    failed = ckpt(repo, "verify", "--dir", str(out), ok=False)
    assert failed.exit_code == 1 and "modified  notes.txt" in failed.stdout


def test_reports_payloads_and_a_name_that_is_not_utf8(repo: Path, tmp_path: Path) -> None:
    small_trail(repo)
    odd = os.fsdecode(b"caf\xe9.txt")
    write(repo / odd, "latin-1 name\n")
    big = {"rows": [f"row {i:05d} of a long tool output" for i in range(3000)]}
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps({"output": big}))
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    ckpt(repo, "resume", "t")  # finished: a report all the same
    out = tmp_path / "out"
    result = export(repo, "t", out)
    task = out / "tasks/t"
    assert (task / "events.jsonl").read_text() == ckpt(repo, "log", "t", "--json").stdout
    [payload] = (task / "payloads").iterdir()
    assert json.loads(payload.read_text()) == big
    assert f'"blob":"{payload.stem}"' in (task / "events.jsonl").read_text()
    [report_id] = ckpt_json(repo, "report", "t", "--list")
    report_dir = task / "reports" / report_id["id"]
    stored = git(repo, "show", f"refs/agent/reports/t:{report_id['id']}/report.md")
    assert (report_dir / "report.md").read_text().strip() == stored
    index = json.loads((out / "export.json").read_text())
    assert index["tasks"][0]["reports"] == [report_id["id"]] and result["redacted"] == 0
    last = manifest(out, len(index["tasks"][0]["checkpoints"]))
    entry = next(f for f in last["files"] if "path_bytes_b64" in f)
    assert entry["path"] == '"caf\\351.txt"' and entry["sha256"] == sha(b"latin-1 name\n")
    ckpt(repo, "verify", "--dir", str(out))
    mixed = ckpt(repo, "verify", "t", "--dir", str(out), ok=False)
    assert mixed.exit_code == 2 and "--dir" in mixed.stderr


def test_an_export_inside_the_working_tree_is_not_extra(repo: Path) -> None:
    small_trail(repo)
    export(repo, "t", repo / "review")
    ckpt(repo, "verify", "--dir", "review")  # relative to -C, like every path argument
    write(repo / "stray.txt", "stray\n")
    failed = ckpt(repo, "verify", "--dir", "review", "--json", ok=False)
    assert [d["path"] for d in json.loads(failed.stdout)["differences"]] == ["stray.txt"]


def test_verify_dir_checks_large_files_by_their_pinned_sha256(repo: Path, tmp_path: Path) -> None:
    write(repo / ".agent/ckpt.toml", '[snapshot]\nmax_file_size = "1k"\n')
    big = b"0123456789abcdef" * 256  # 4 KiB, untracked: pinned by sha256, never stored
    (repo / "model.bin").write_bytes(big)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    out = tmp_path / "out"
    export(repo, "t", out)
    assert not any(f["path"] == "model.bin" for f in manifest(out, 1)["files"])
    folder = next((out / "tasks/t/checkpoints").glob("0001-*"))
    pins = json.loads((folder / "assertions.json").read_text())["assertions"]
    assert [a["check"]["sha256"] for a in pins if a["check"]["file"] == "model.bin"] == [sha(big)]
    ckpt(repo, "verify", "--dir", str(out))  # present, with the pinned content: not extra
    (repo / "model.bin").write_bytes(big[::-1])
    failed = ckpt(repo, "verify", "--dir", str(out), "--json", ok=False)
    [difference] = json.loads(failed.stdout)["differences"]
    assert (difference["kind"], difference["path"]) == ("modified", "model.bin")
    (repo / "model.bin").unlink()
    failed = ckpt(repo, "verify", "--dir", str(out), "--json", ok=False)
    assert json.loads(failed.stdout)["differences"][0]["kind"] == "missing"
