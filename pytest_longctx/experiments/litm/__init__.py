"""Lost in the Middle (Liu et al., 2023; TACL 2024) as an experiment package.

Multi-document QA over NQ-Open (``litm-qa``: documents, gold_position) and key-value retrieval
(``litm-kv``: keys, key_position), with the paper's prompts and metrics, a U-curve figure and a table in
the paper's layout. It reaches the core only through the public API (``Trial``, ``Request``, ``Oracle``, the
``longctx`` fixture and marker), the corpus lookup, and its own pytest11 entry point for its options.
"""

from __future__ import annotations

#: Experiment names (the ``longctx`` marker's argument) of the two tasks.
QA_EXPERIMENT = "litm-qa"
KV_EXPERIMENT = "litm-kv"
