"""``python -m pytest_longctx.corpus``: the ``longctx-data`` command (fetch and verify corpora)."""

from pytest_longctx.corpus.fetch import main

raise SystemExit(main())
