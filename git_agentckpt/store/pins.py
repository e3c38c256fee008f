"""Pins of the key inputs (`[env] key_inputs`): sha256 assertions every checkpoint holds.

A key input (a config, a data file) that changes after a step ran with it
makes that step's results suspect; each checkpoint records what it was, and
resume checks it (design section 3, step 3).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath

from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON
from git_agentckpt.store.tools import sha256_file

__all__ = ["key_input_assertions"]


_NON_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def key_input_assertions(workdir: str, paths: Sequence[str]) -> list[dict[str, JSON]]:
    """Assertions pinning the key inputs (`[env] key_inputs`) as they are now.

    A regular file (a symlink is followed) gets `file_sha256` with its current
    digest; a directory gets `file_exists` (name files to pin their content);
    a path that does not exist (or is a FIFO, socket, device) gets none: no
    check kind asserts absence, and `env.files` already records it as missing.
    Ids are `key-<path with other characters as _>`, unique within the list.
    An absolute path or one with `..` is a `ContractError`.
    """
    out: list[dict[str, JSON]] = []
    seen: set[str] = set()
    for rel in paths:
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts or "\0" in rel:
            raise UsageError(
                f".agent/ckpt.toml: [env] key_inputs: {rel!r} must be a path inside the "
                "working tree"
            )
        full = os.path.join(workdir, rel)
        try:
            mode = os.stat(full).st_mode
        except OSError:
            continue
        ident = "key-" + _NON_ID.sub("_", rel.strip("/"))[:100]
        if ident in seen:
            ident += "-" + hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        seen.add(ident)
        if stat.S_ISDIR(mode):
            check: dict[str, JSON] = {"kind": "file_exists", "file": rel}
        elif stat.S_ISREG(mode):
            check = {"kind": "file_sha256", "file": rel, "sha256": sha256_file(full)}
        else:
            continue
        out.append({"id": ident, "text": f"key input {rel} as at this checkpoint", "check": check})
    return out
