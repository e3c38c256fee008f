"""`git ckpt timeline TASK --html FILE`, checked in a real browser: a real task (steps,
a failed step, checkpoints, a constraint check failing then passing with its drift
alarm, a resume that found workspace drift, a confirmation) is written as a page that
headless Chromium (Debian's `chromium`) loads with its scripts; the test reads the DOM
the scripts left and a screenshot. An event payload carrying `<script>` shows as text
and never runs.

Chromium is installed when missing where that is possible (root with apt-get: this
machine and CI, like `.ci/need-chromium`); the test is skipped, with the reason, only
where it cannot be installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

import git_agentckpt
from git_agentckpt.audit.timeline import build_timeline
from git_agentckpt.audit.timeline_html import render
from git_agentckpt.model import NewEvent
from git_agentckpt.store.refs import TaskName

ROOT = Path(__file__).resolve().parent.parent
EVIL = "<script>document.title='pwned'</script>"
EVIL_ATTR = '"><img src=x onerror="document.title=\'img\'">'
CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
"""
RESTATEMENT = """Goal: reproduce table 2 of the paper.
Constraints: seed42 - experiments use seed 42.
s1 is done and not to be redone.
Next step: s2
"""


def chromium() -> str:
    """The chromium binary; installed with apt-get when missing and we are root."""
    found = shutil.which("chromium")
    if found:
        return found
    script = ROOT / ".ci" / "need-chromium"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and cannot be here (needs root and apt-get)")
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    found = shutil.which("chromium")
    assert found, "apt-get installed chromium but it is not on PATH"
    return found


def browser(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    argv = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    env = {**os.environ, "HOME": str(tmp)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def build_task(repo: Path) -> dict[str, Any]:
    """The task the page shows; what the assertions compare with."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(repo, "task", "start", "t", "--goal", "Reproduce table 2 of the paper",
         "--step", "s1:read the papers", "--step", "s2:train", "--step", "s3:report",
         "--constraint", "seed42")  # fmt: skip
    ck = git_agentckpt.open(str(repo))
    ckpt(repo, "step", "start", "t", "s1")
    ck.event("t", "tool.call", {"input": "grep -r seed", "output": "config.json"}, actor="claude")
    ck.event("t", "tool.call", {"input": EVIL, "output": EVIL_ATTR, "step": "s1"})
    usage = {"input_tokens": 1200, "output_tokens": 300}
    ck.event("t", "model.call", {"input": "plan", "usage": usage}, actor="claude")
    ckpt(repo, "step", "done", "t", "s1", "--output", '{"papers": 2}')
    ckpt(repo, "check", "t")  # passes
    write(repo / "config.json", '{"train": {"seed": 7}}\n')
    ckpt(repo, "check", "t", ok=False)  # fails: a drift alarm (the constraint held before)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    ckpt(repo, "check", "t")  # passes again
    ckpt(repo, "step", "start", "t", "s2")
    ck.event("t", "tool.call", {"input": "python train.py", "output": "CUDA out of memory"})
    ckpt(repo, "step", "fail", "t", "s2", "--output", '{"error": "out of memory"}')
    ckpt(repo, "step", "start", "t", "s2")
    ckpt(repo, "create", "-t", "t", "--light", "-m", "mid s2")
    write(repo / "train.py", "print('edited by hand')\n")  # workspace drift
    stopped = ckpt(repo, "resume", "t", ok=False)
    assert stopped.exit_code == 10, stopped.output
    ckpt(repo, "resume", "t", "--accept-drift")
    ckpt(repo, "confirm", "t", "--restatement", "-", input=RESTATEMENT)
    checkpoints = ckpt_json(repo, "list", "t")
    return {"checkpoints": checkpoints}


def png_size_and_ink(data: bytes) -> tuple[int, int, int]:
    """(width, height, pixels that are not white) of an 8-bit RGB(A) PNG, stdlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            head = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", head[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    ink = 0
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        ink += sum(1 for x in range(0, stride, bpp) if line[x : x + 3] != b"\xff\xff\xff")
        prev = line
    return width, height, ink


def test_timeline_page_in_headless_chromium(repo: Path, tmp_path: Path) -> None:
    binary = chromium()
    made = build_task(repo)
    page = tmp_path / "timeline.html"
    out = ckpt_json(repo, "timeline", "t", "--html", str(page))
    assert out["counts"]["resumes"] == 2 and out["counts"]["steps failed"] == 1
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text and "@import" not in text and "url(http" not in text
    assert not re.search(r"\ssrc\s*=\s*[\"']", text)  # no tag loads anything
    assert text.count("<script") == 1  # ours; the payload is text
    dom = browser(binary, tmp_path, "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-ready="yes"' in html  # our script ran
    assert "<title>Timeline of task t</title>" in html  # the payload did not set the title
    assert "pwned" in html and "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in html
    assert len(re.findall(r"<script\b", html)) == 1 and "<img" not in html
    for c in made["checkpoints"]:  # every checkpoint, linked to its commit
        link = re.search(
            rf'<a class="commit" href="[^"]*" data-commit="{c["commit"]}" '
            rf'data-show="git ckpt show {c["id"]}"',
            html,
        )
        assert link, f"checkpoint {c['id']} has no link"
        assert f"<code>{c['commit'][:12]}</code>" in html
    axis = html.split('<div class="axis">', 1)[1].split("</svg>", 1)[0]
    spans = re.findall(r'<rect class="span step st-(\w+)"', axis)
    assert sorted(spans) == ["done", "failed", "open"]  # s1 done, s2 failed then open again
    rows = re.findall(r'<tr id="item-\d+" class="lane-(\w+) kind-(\w+)( problem)?">', html)
    checks = [r for r in rows if r[1] == "check"]
    assert [bool(r[2]) for r in checks] == [False, True, False]  # pass, FAIL, pass
    assert "failing: seed42: fail" in html
    assert re.search(r"drift alarm: constraint_regressed \(seed42\)", html)
    assert "workspace drift: train.py added" in html
    assert "outcome: needs_person" in html and "outcome: ready" in html
    assert "restatement confirmed by the checker" in html
    assert "tokens: input=1200 output=300" in html

    shot = tmp_path / "shot.png"
    done = browser(
        binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,1400", page.as_uri()
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert 20_000 < len(data) < 5_000_000
    width, height, ink = png_size_and_ink(data)
    assert (width, height) == (1280, 1400)
    assert ink > width * height // 50  # not blank: lanes, marks and text drawn
    keep = os.environ.get("GIT_CKPT_TIMELINE_SHOT")
    if keep:  # to look at it: GIT_CKPT_TIMELINE_SHOT=/tmp/x.png pytest tests/test_timeline.py
        shutil.copy(shot, keep)
        shutil.copy(page, keep + ".html")


def ten_thousand(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A task of 10,000 agent events over six hours (a clock that advances 2.16 s per
    event, with a failed and a done step and checkpoints among them)."""
    from git_agentckpt.model import iso_now
    from git_agentckpt.store import events as events_module

    clock = [1_780_000_000.0]

    def fake_now(now: float | None = None) -> str:
        clock[0] += 0.001
        return iso_now(clock[0] if now is None else now)

    monkeypatch.setattr(events_module, "iso_now", fake_now)
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")
    ck = git_agentckpt.open(str(repo))
    for part in range(4):
        if part == 1:
            ck.step_start("t", "s1")
        if part == 2:
            ck.step_fail("t", "s1", {"error": "boom"})
            ck.step_start("t", "s1")
        batch = []
        for k in range(2500):
            clock[0] += 2.16
            kind = "model.call" if k % 5 == 0 else "tool.call"
            batch.append(NewEvent(kind, input={"i": part * 2500 + k}))
            if len(batch) == 10:
                ck.log.append(TaskName("t"), batch)
                batch = []
        ck.create("t", message=f"part {part}", light=True)
    return ck


def test_ten_thousand_events_are_counted_in_buckets(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ck = ten_thousand(repo, monkeypatch)
    tl = build_timeline(ck, "t")
    buckets = [m for m in tl.marks if m.kind == "bucket"]
    assert tl.counts["tool calls"] == 8000 and tl.counts["model calls"] == 2000
    assert tl.end - tl.start > 6 * 3600 - 60
    assert tl.bucket_seconds == 300  # six hours in minutes: more than 240 buckets
    assert 60 < len(buckets) <= 240
    counted = sum(m.count for m in buckets) + sum(m.kind == "event" for m in tl.marks)
    assert counted == 10_000
    assert all(m.detail.startswith(f"{m.count} events in 5 min: ") for m in buckets)
    assert "tool.call" in buckets[1].detail and "model.call" in buckets[1].detail
    assert tl.counts["checkpoints"] == 5 and tl.counts["steps failed"] == 1
    page = render(tl)
    assert len(page) < 400_000  # not one element per event
    assert page.count('class="bar"') == len(buckets) + 1  # and one in the legend


def test_every_field_is_escaped(repo: Path) -> None:
    """Untrusted text in every place the page shows: goal, step title, payloads, actor."""
    ckpt(repo, "task", "start", "t", "--goal", EVIL, "--step", f"s1:{EVIL}")
    ck = git_agentckpt.open(str(repo))
    ckpt(repo, "step", "start", "t", "s1")
    ck.event("t", "x.y", {"input": EVIL_ATTR, "output": {"k": EVIL}}, actor=EVIL_ATTR)
    _, page = ck.timeline("t", commit_url="https://forge.example/r/commit/{commit}")
    assert "<img" not in page and EVIL not in page and page.count("<script") == 1
    assert "&lt;script&gt;" in page and "&quot;&gt;&lt;img" in page
    assert 'href="https://forge.example/r/commit/' in page
    bad = ckpt(repo, "timeline", "t", "--html", "x.html", "--commit-url", "https://x", ok=False)
    assert bad.exit_code == 2 and "{commit}" in bad.stderr
    stdout = ckpt(repo, "timeline", "t", "--html", "-").stdout
    assert stdout.startswith("<!DOCTYPE html>") and json.dumps("t")
