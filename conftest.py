"""Wires evals/ to the corpora: in a checkout with ../shared beside it (CI, this team's machines),
the Federal Register issue is read from there instead of being downloaded."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_FR = Path(__file__).resolve().parent.parent / "shared" / "corpora" / "federal_register_2024-02-12" / "current"

if SHARED_FR.is_dir():
    os.environ.setdefault("LONGCTX_DATA_DIR", str(SHARED_FR))
