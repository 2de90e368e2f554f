"""Wires evals/ (and the plugin's own tests) to the corpora of this team's checkouts.

Corpora are found by the plugin's lookup: --longctx-data-dir, $LONGCTX_DATA_DIR, the cache, a download
(pytest_longctx/corpus/lookup.py). A checkout with ../shared beside it (CI, this team's machines) uses
../shared/corpora as its default $LONGCTX_DATA_DIR, exactly as a user would set it; an explicit
$LONGCTX_DATA_DIR wins. A fresh clone without ../shared downloads once into the cache, or, offline,
the tests that need a corpus skip with one line saying how to provide it.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_CORPORA = Path(__file__).resolve().parent.parent / "shared" / "corpora"

if SHARED_CORPORA.is_dir() and not os.environ.get("LONGCTX_DATA_DIR"):  # empty counts as unset
    os.environ["LONGCTX_DATA_DIR"] = str(SHARED_CORPORA)
