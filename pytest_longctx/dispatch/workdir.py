"""The prefetch work folder: the files the controller's dispatcher (or batch rounds) and the waiting tests share.

``keys.txt`` (every planned key), ``errors/<key>.json`` (a request's failure: errors are never cached),
``kept/<key>.json`` (an answer the cache could not store), ``sent/<key>`` (sent by the controller in this run),
``wanted/<key>.<pid>.<n>`` (a test waits for it), ``stopped`` (why the run stopped) and ``done`` (the dispatcher
ended; its text: why it failed, if it did).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def error_path(work: Path, key: str) -> Path:
    return work / "errors" / f"{key}.json"


def kept_path(work: Path, key: str) -> Path:
    """An answer the cache could not store, kept for this run only."""
    return work / "kept" / f"{key}.json"


def stopped_path(work: Path) -> Path:
    """Written when the run stopped (SIGINT, -x, a fatal error): holds why; waiting tests then end skipped."""
    return work / "stopped"


def sent_path(work: Path, key: str) -> Path:
    """Marker of a request the controller sent in this run (its answer is then not a cache hit)."""
    return work / "sent" / key


def mark_sent(work: Path, key: str) -> None:
    """Mark ``key`` sent in this run, before its answer is stored: a waiter finding it counts a request sent."""
    sent = sent_path(work, key)
    sent.parent.mkdir(parents=True, exist_ok=True)
    sent.touch()


def write_error(work: Path, key: str, message: str, fatal: bool) -> None:
    path = error_path(work, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"error": message, "fatal": fatal}), encoding="utf-8")
    os.replace(tmp, path)


def wanted_keys(work: Path) -> frozenset[str]:
    """The requests tests are waiting for now (``wanted/<key>.<pid>.<n>``, one marker per waiting test)."""
    try:
        return frozenset(name.split(".", 1)[0] for name in os.listdir(work / "wanted"))
    except OSError:
        return frozenset()


def waiting_test() -> str:
    """`` (test <node id>)`` of the test running in this process, for an error's message ("" outside one)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    return f" (test {test})" if test else ""
