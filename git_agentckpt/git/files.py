"""Small runtime files under `.git/agent/`, written whole or not at all."""

from __future__ import annotations

import os


def write_if_changed(path: str, data: bytes) -> None:
    """Replace `path` by `data` atomically (a rename), unless it already holds exactly that."""
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
