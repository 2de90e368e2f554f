"""Atomic file writes: a temporary file in the same folder, then ``os.replace``.

Parallel xdist workers and runs killed mid-write therefore never leave half a file behind. The temporary file
is created like ``open(path, "w")`` creates a file (mode 0666 less the user's umask, e.g. 0644 under umask 022),
not 0600 as ``tempfile.mkstemp`` would, so reports, cache entries and records are readable as the user expects.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

#: The mode a new file is created with before the umask applies (what ``open(path, "w")`` uses).
FILE_MODE = 0o666


def create_temp_file(folder: Path, prefix: str, suffix: str = "") -> tuple[int, str]:
    """``tempfile.mkstemp`` with the user's umask: (open descriptor, path) of a new file in ``folder``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = os.path.join(folder, f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            return os.open(name, flags, FILE_MODE), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {folder}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_file(path.parent, ".tmp-", path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def folder_problem(path: Path, *, write: bool = True) -> str | None:
    """Why ``path`` cannot serve as a folder to read (and, with ``write``, write), or None when it can.

    Nothing is created: a missing folder is fine when its nearest existing ancestor is a writable folder.
    """
    if path.exists() and not path.is_dir():
        return "is a file, not a folder"
    if path.is_dir():
        if not write:
            return None if os.access(path, os.R_OK | os.X_OK) else "is not readable"
        try:
            with tempfile.TemporaryFile(dir=path, prefix=".probe-"):
                pass
        except OSError as exc:
            return f"is not writable ({exc.strerror or exc})"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is a file, not a folder"
    if write and not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {parent} is not writable"
    return None


def output_file_problem(path: Path, example: str, *, parent_must_exist: bool = False) -> str | None:
    """Why ``path`` cannot be written as an output file (said after the path's name), or None.

    Args:
        example: a file name to suggest when ``path`` is a folder.
        parent_must_exist: a missing folder is a problem (else it may be created).
    """
    if path.is_dir():
        return f"{path} is a folder; pass a file path such as {path / example}"
    if parent_must_exist and not path.parent.exists():
        return f"{path}: folder {path.parent} does not exist; create it or pass another path"
    problem = folder_problem(path.parent)
    if problem is not None:
        return f"{path}: folder {path.parent} {problem}; pass a writable path"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is not writable; pass a writable path"
    return None
