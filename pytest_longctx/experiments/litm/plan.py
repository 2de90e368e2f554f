"""Which cells a run has: document and key counts, positions, baselines; parsed from the experiment's options.

Positions are the paper's by default (EXPERIMENTS.md and the paper's figures): gold document at 0, 4, 9, ...
every fifth index and the last; key at 0, 24, 49, 74 of 75 and 0, 34, 69, 104, 139 of 140.
``all`` uses every index; a list uses those below each count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_longctx import Defaults, Settings
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.litm.data import KV_KEY_COUNTS

#: The paper's gold-document positions per number of documents.
QA_POSITIONS: dict[int, tuple[int, ...]] = {
    10: (0, 4, 9),
    20: (0, 4, 9, 14, 19),
    30: (0, 4, 9, 14, 19, 24, 29),
}
#: The paper's key positions per number of keys (the 300-key file is not available).
KV_POSITIONS: dict[int, tuple[int, ...]] = {
    75: (0, 24, 49, 74),
    140: (0, 34, 69, 104, 139),
}
#: Windows below this many tokens get the small defaults (the embedded CPU model has 8,192).
SMALL_WINDOW = 16_000
SMALL_DOCUMENTS = (10,)
SMALL_KEYS = (75,)
#: The experiments' names in the records: the QA task and the key-value task.
EXPERIMENTS = ("litm-qa", "litm-kv")
#: Documents a run may ask for (the oracle file holds 2,655 passages; distractors must contain no answer).
MAX_DOCUMENTS = 100


@dataclass(frozen=True)
class LitmOptions:
    """The experiment's options as given (empty: the defaults for the model's window)."""

    documents: tuple[int, ...] = ()
    keys: tuple[int, ...] = ()
    positions: str = "paper"
    baselines: bool = True
    #: --longctx-litm-design resolved: blocks (:mod:`.design`) or full (every question in every QA cell)
    design: str = "full"
    #: (noun, value as given: None for the default) of each option, for the record's settings
    given: tuple[tuple[str, object], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The options as given (None: the default), the design as resolved."""
        given = {"litm_" + noun.removeprefix("litm-").replace("-", "_"): value for noun, value in self.given}
        return {**given, "litm_design": self.design}


def _positions(text: str) -> str:
    text = text.strip().lower().replace(" ", "")
    if text in ("paper", "all"):
        return text
    try:
        numbers = sorted({int(p) for p in text.split(",") if p})
    except ValueError:
        raise UsageError(f"--longctx-litm-positions: expected paper, all or indices like 0,4,9, got {text!r}") from None
    if not numbers or numbers[0] < 0:
        raise UsageError(f"--longctx-litm-positions: indices must be 0 or more, got {text!r}")
    return ",".join(str(n) for n in numbers)


def _counts(flag: str, text: str | None, allowed: tuple[int, ...] | None) -> tuple[int, ...]:
    if text is None or not text.strip():
        return ()
    try:
        numbers = tuple(sorted({int(p) for p in text.replace(" ", "").split(",") if p}))
    except ValueError:
        raise UsageError(f"{flag}: expected comma-separated whole numbers, got {text!r}") from None
    for n in numbers:
        if allowed is not None and n not in allowed:
            raise UsageError(f"{flag}: {n} keys has no data file; choose from {', '.join(map(str, allowed))}")
        if allowed is None and not 2 <= n <= MAX_DOCUMENTS:
            raise UsageError(f"{flag}: document counts must be 2..{MAX_DOCUMENTS}, got {n}")
    return numbers


def parse_options(documents: str | None, keys: str | None, positions: str | None, baselines: str | None,
                  design: str = "full") -> LitmOptions:
    """Validate the raw option values; a bad one is a one-line UsageError naming the option. ``design``: from
    :func:`resolve_design`."""
    flag = str(baselines).strip().lower() if baselines is not None else "true"
    if flag not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise UsageError(f"--longctx-litm-baselines: expected true or false, got {baselines!r}")
    return LitmOptions(documents=_counts("--longctx-litm-documents", documents, None),
                       keys=_counts("--longctx-litm-keys", keys, KV_KEY_COUNTS),
                       positions=_positions(positions or "paper"),
                       baselines=flag in ("1", "true", "yes", "on"), design=design)


def resolve_design(given: object, *, remote: bool, protocol: str, samples_all: bool) -> str:
    """``--longctx-litm-design`` (:func:`~pytest_longctx.util.blocks.resolve_design`): the source protocol keeps the
    paper's full design."""
    from pytest_longctx.util.blocks import resolve_design as resolve

    return resolve("--longctx-litm-design", given, remote=remote, protocol=protocol, samples_all=samples_all,
                   source="the paper's full design", item="question")


def _pick(count: int, paper: tuple[int, ...], positions: str) -> tuple[int, ...]:
    if positions == "paper":
        return paper
    if positions == "all":
        return tuple(range(count))
    return tuple(p for p in (int(x) for x in positions.split(",")) if p < count)


def qa_cells(options: LitmOptions, window: int) -> list[tuple[int, int | None]]:
    """``(documents, gold_position)`` of every QA cell: closed-book ``(0, None)`` and oracle ``(1, 0)`` first."""
    counts = options.documents or (SMALL_DOCUMENTS if window < SMALL_WINDOW else tuple(QA_POSITIONS))
    cells: list[tuple[int, int | None]] = [(0, None), (1, 0)] if options.baselines else []
    for n in counts:
        paper = QA_POSITIONS.get(n) or tuple(sorted({0, *range(4, n - 1, 5), n - 1}))
        picked = _pick(n, paper, options.positions)
        if not picked:
            raise UsageError(f"--longctx-litm-positions: none of {options.positions} is below {n} documents")
        cells.extend((n, p) for p in picked)
    return cells


def kv_cells(options: LitmOptions, window: int) -> list[tuple[int, int]]:
    """``(keys, key_position)`` of every key-value cell."""
    counts = options.keys or (SMALL_KEYS if window < SMALL_WINDOW else KV_KEY_COUNTS)
    cells: list[tuple[int, int]] = []
    for n in counts:
        picked = _pick(n, KV_POSITIONS[n], options.positions)
        if not picked:
            raise UsageError(f"--longctx-litm-positions: none of {options.positions} is below {n} keys")
        cells.extend((n, p) for p in picked)
    return cells


#: Trials per cell for a remote model: enough distinct questions (rows) that the pooled gate sees a uniform
#: 5-point drop at the plan's stated assumptions (docs/ci-gating.md, "What a run can detect").
REMOTE_SAMPLES = 180


def litm_defaults(options: LitmOptions, settings: Settings) -> list[Defaults]:
    """180 questions (rows) a cell for a remote model, so a 5-point drop is visible; otherwise the core's default."""
    remote = settings.model.profile.runs == "remote"
    why = "180 distinct questions (rows): a uniform 5-point drop is seen at intra-item correlation 0.5"
    if options.design == "blocks":
        from pytest_longctx.experiments.litm.design import COUNTS_PER_BLOCK

        blocks = {"design": "blocks", "counts_per_block": COUNTS_PER_BLOCK}
        qa_why = ("180 questions a cell, each question at one number of documents at every gold position (540 "
                  "questions for the paper's 10/20/30): the pooled alarm sees a 5-point drop, diffuse or "
                  "concentrated, for the full design's requests")
        n = REMOTE_SAMPLES if remote else None
        return [Defaults("litm-qa", n, blocks, qa_why if remote else ""),
                Defaults("litm-kv", n, why=why if remote else "")]
    return [Defaults(name, REMOTE_SAMPLES, why=why) if remote else Defaults(name) for name in EXPERIMENTS]
