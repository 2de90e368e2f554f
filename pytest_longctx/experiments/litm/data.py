"""The paper's data files: where they come from (pinned commit + sha256), how they are found and read.

Files are found by the plugin's corpus lookup (:mod:`pytest_longctx.corpus.lookup`): ``--longctx-data-dir``,
``$LONGCTX_DATA_DIR`` (a folder holding ``lost_in_the_middle/<file>`` or the corpus folder itself), the cache
(``<cache-dir>/corpora/lost_in_the_middle/<file>``), else one download from the repository's raw URL at the
pinned commit, checked against the pinned sha256. ``$LONGCTX_LITM_URL`` replaces the download base (a mirror).
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pytest_longctx.corpus.lookup import CorpusFile, find_corpus
from pytest_longctx.errors import UsageError

#: Corpus folder name (in a folder of corpora and in the cache).
CORPUS = "lost_in_the_middle"
#: The source repository (MIT) and the commit the files and prompts are pinned to.
REPOSITORY = "nelson-liu/lost-in-the-middle"
COMMIT = "29b8a6d042ce29abccee3db1a73171a107d7e6af"
#: Download base: ``{file}`` is the path inside the repository.
RAW_URL = f"https://raw.githubusercontent.com/{REPOSITORY}/{COMMIT}/{{file}}"
#: Environment variable replacing :data:`RAW_URL` (e.g. a mirror), with the same ``{file}`` placeholder.
URL_ENV = "LONGCTX_LITM_URL"

#: name -> (path in the repository, sha256 of its bytes); see ../shared/corpora/lost_in_the_middle/SOURCE.md.
FILES: dict[str, tuple[str, str]] = {
    "qa": ("qa_data/nq-open-oracle.jsonl.gz", "6a7f72b846f663a133ef952244e5a4e43f06bcf190afe34e8fbe687ce0d1653e"),
    "kv-75": ("kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz",
              "eb6d61fc3473349f2b86df76757c6ab659cc929d907d24caf1c69928e03f6203"),
    "kv-140": ("kv_retrieval_data/kv-retrieval-140_keys.jsonl.gz",
               "66d54aae7e38779da482895ccd538faaf5309f144e54f30dc530a95091581fa1"),
}
#: Key counts with a shipped file (the paper's 300-key file is not available).
KV_KEY_COUNTS = (75, 140)
T = TypeVar("T")


@dataclass(frozen=True)
class Question:
    """One NQ-Open question with its answers and its gold passage."""

    index: int
    question: str
    answers: tuple[str, ...]
    title: str
    text: str


@dataclass(frozen=True)
class KvRow:
    """One key-value retrieval example: the records in the file's order, the key to find and its value."""

    index: int
    records: tuple[tuple[str, str], ...]
    key: str
    value: str


def corpus_file(name: str) -> CorpusFile:
    """The lookup's description of one file (``qa``, ``kv-75``, ``kv-140``)."""
    path, sha256 = FILES[name]
    base = os.environ.get(URL_ENV) or RAW_URL
    return CorpusFile(corpus=CORPUS, file=path, title=f"Lost in the Middle {path}", url=base.format(file=path),
                      sha256=sha256)


def corpora(arg: str | None) -> list[CorpusFile]:
    """``longctx-data fetch litm``: the paper's three data files."""
    if arg:
        raise UsageError(f"litm takes no argument (got litm:{arg}); its files are {', '.join(FILES)}")
    return [corpus_file(name) for name in FILES]


def locate(name: str, *, data_dir: str | None, cache_dir: Path, download: bool = True) -> Path:
    """The path of a data file (``cache_dir`` is the run's cache folder); raises CorpusNotFound (one line)."""
    return find_corpus(corpus_file(name), data_dir=data_dir, cache_dir=cache_dir / "corpora" / CORPUS,
                       download=download)


def _rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{number}: not JSON ({exc.msg}); replace the file "
                                     "(delete it from the cache to download it again)") from None
                if not isinstance(row, dict):
                    raise UsageError(f"{path}:{number}: expected a JSON object per line")
                rows.append(row)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read as gzip'd JSON lines ({exc}); replace the file") from None
    return rows


def _parsed(path: Path, parse: Callable[[int, dict[str, Any]], T], expected: str) -> list[T]:
    """Each row of the file through ``parse(index, row)``; a row it cannot read is a UsageError naming its line."""
    out = []
    for i, row in enumerate(_rows(path)):
        try:
            out.append(parse(i, row))
        except (KeyError, TypeError, ValueError, StopIteration):
            raise UsageError(f"{path}:{i + 1}: expected {expected}") from None
    return out


def _question(i: int, row: dict[str, Any]) -> Question:
    gold = next(c for c in row["ctxs"] if c.get("isgold"))
    return Question(i, str(row["question"]), tuple(str(a) for a in row["answers"]), str(gold["title"]),
                    str(gold["text"]))


def load_questions(path: Path) -> list[Question]:
    """The oracle file's questions with their gold passage (``ctxs[0]``, the one marked ``isgold``)."""
    return _parsed(path, _question, "question, answers and a ctxs entry with isgold")


def _kv_row(i: int, row: dict[str, Any]) -> KvRow:
    return KvRow(i, tuple((str(k), str(v)) for k, v in row["ordered_kv_records"]), str(row["key"]),
                 str(row["value"]))


def load_kv(path: Path) -> list[KvRow]:
    """The key-value rows of one file, records in the file's order."""
    out = _parsed(path, _kv_row, "ordered_kv_records, key and value")
    for row in out:
        if (row.key, row.value) not in row.records:
            raise UsageError(f"{path}:{row.index + 1}: the key to retrieve is not among its records")
    return out


def sample_order(count: int, seed: int, task: str) -> list[int]:
    """The row each trial index uses: a seeded permutation, identical in every cell (paired samples)."""
    order = list(range(count))
    random.Random(f"litm:{task}:{seed}").shuffle(order)
    return order
