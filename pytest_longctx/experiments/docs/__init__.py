"""Long-context evaluation on your own documents: folder loading, QA generation and review,
BM25 retrieval, whole-document contexts, scorers and the judge (the ``docs`` experiment).

Command line: ``longctx-docs generate|review DIR`` (see ``__main__``).
"""

from __future__ import annotations
