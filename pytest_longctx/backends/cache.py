"""The response cache shared by every xdist worker: one JSON file per request key.

Entries are written to a temporary file and ``os.replace``d into place, so concurrent workers
and a run killed mid-write never leave a half-written entry. Errors are never cached. A corrupt
entry is reported once and refetched.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from pytest_longctx.fsutil import atomic_write_text

FORMAT = 1


class ResponseCache:
    """``root/ab/abcdef....json`` files holding one completion each."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored completion JSON, or None when absent or corrupt (corrupt is warned about)."""
        path = self.path(key)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(raw)
            if entry.get("format") != FORMAT or not isinstance(entry.get("completion"), dict):
                raise ValueError("unexpected layout")
            completion: dict[str, Any] = entry["completion"]
            return completion
        except (ValueError, AttributeError) as exc:
            warnings.warn(f"longctx cache: corrupt entry {path} ({exc}); refetching", stacklevel=2)
            return None

    def put(self, key: str, completion: dict[str, Any], meta: dict[str, Any]) -> None:
        """Store atomically. ``meta`` (provider, model, template) is for humans; it never holds secrets."""
        payload = json.dumps({"format": FORMAT, "key": key, "meta": meta, "completion": completion},
                             ensure_ascii=False, sort_keys=True)
        atomic_write_text(self.path(key), payload)

    def __contains__(self, key: str) -> bool:
        return self.path(key).is_file()
