"""The response cache shared by every xdist worker: one JSON file per request key.

Entries are written to a temporary file and ``os.replace``d into place, so concurrent workers
and a run killed mid-write never leave a half-written entry. Errors are never cached. A corrupt
entry (bytes that are not UTF-8, bad JSON, a wrong layout) is reported once and refetched; in
replay mode it is an error of its trial (see :meth:`ResponseCache.problem`).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from pytest_longctx.util.fsutil import atomic_write_text

FORMAT = 1


class CorruptEntry(ValueError):
    """A cache entry exists but cannot be used."""


class ResponseCache:
    """``root/ab/abcdef....json`` files holding one completion each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        #: Corrupt entries already reported by this process, with why (each is warned about once).
        self.corrupt: dict[str, str] = {}

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored completion JSON, or None when absent or corrupt (corrupt is warned about once)."""
        try:
            return self.read(key)
        except CorruptEntry as exc:
            path = str(self.path(key))
            if path not in self.corrupt:
                self.corrupt[path] = str(exc)
                warnings.warn(f"longctx cache: corrupt entry {path} ({exc}); refetching", stacklevel=2)
            return None

    def read(self, key: str) -> dict[str, Any] | None:
        """The stored completion JSON, None when absent; raise :class:`CorruptEntry` when unusable."""
        from pytest_longctx.backends.base import Completion

        path = self.path(key)
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # absent (its shard folder may not even be a folder)
            return None
        except OSError as exc:
            raise CorruptEntry(f"unreadable: {exc.strerror or exc}") from None
        try:
            entry = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise CorruptEntry("not UTF-8 text") from None
        except ValueError as exc:
            raise CorruptEntry(f"not JSON: {exc}") from None
        if (not isinstance(entry, dict) or entry.get("format") != FORMAT
                or not isinstance(entry.get("completion"), dict)):
            raise CorruptEntry(f"unexpected layout (format {FORMAT} with a completion object expected)")
        completion: dict[str, Any] = entry["completion"]
        try:
            Completion.from_json(completion)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptEntry(f"unexpected layout: completion {type(exc).__name__} {exc}") from None
        if not isinstance(completion.get("text"), str):
            raise CorruptEntry("unexpected layout: completion text is not a string")
        return completion

    def problem(self, key: str) -> str | None:
        """Why the entry for ``key`` cannot be used (``path: why``), or None when it is absent or fine."""
        try:
            self.read(key)
        except CorruptEntry as exc:
            return f"{self.path(key)}: {exc}"
        return None

    def put(self, key: str, completion: dict[str, Any], meta: dict[str, Any]) -> None:
        """Store atomically. ``meta`` (provider, model, template) is for humans; it never holds secrets."""
        payload = json.dumps({"format": FORMAT, "key": key, "meta": meta, "completion": completion},
                             ensure_ascii=False, sort_keys=True)
        atomic_write_text(self.path(key), payload)
        self.corrupt.pop(str(self.path(key)), None)

    def __contains__(self, key: str) -> bool:
        return self.path(key).is_file()
