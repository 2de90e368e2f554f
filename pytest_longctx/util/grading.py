"""What the local test server's graders share: deterministic draws, answer normalisation and answer keys.

Each experiment's grader (``pytest_longctx_graders``; e.g. ``experiments/lrt/grader.py``) reads its own prompts with
these, so the server itself names no experiment. A problem with a prompt or a key is a one-line ``ValueError``
starting ``graded:`` (the server answers such a request with a 500, which the suite reports as an error).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx.util.jsonl import BadLine, json_objects

_WS = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”–—")


def draw(*parts: object) -> float:
    """A uniform number in [0, 1) from a hash of ``parts`` (the same on every machine and process)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pick(prompt: str, choices: Sequence[str]) -> str:
    """One of ``choices``, drawn from the prompt (a wrong reply)."""
    return choices[int(draw("wrong", prompt) * len(choices))]


def squash(text: str) -> str:
    """Whitespace collapsed: the form questions are looked up in."""
    return _WS.sub(" ", text).strip()


def normalize(text: str) -> str:
    """SQuAD normalisation (lower case, no punctuation, no articles, single spaces), as the scorers use it."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def contains(answer: str, gold: str) -> bool:
    """Whether normalised ``gold`` is a word-aligned part of normalised ``answer`` (never true for an empty gold)."""
    return bool(normalize(gold)) and f" {normalize(gold)} " in f" {normalize(answer)} "


def tail(prompt: str, pattern: str, what: str, flags: int = 0) -> re.Match[str]:
    """The prompt's closing part: ``pattern`` at its end (``.`` spans lines only with ``flags=re.S``)."""
    found = re.search(pattern + r"\s*$", prompt, flags)
    if found is None:
        raise ValueError(f"graded: a {what} prompt without its question: {prompt[-80:]!r}")
    return found


@dataclass(frozen=True)
class Keyed:
    """One item of an answer key: its id and its accepted answers (the first is the one the model replies)."""

    id: str
    answers: tuple[str, ...]


@dataclass
class AnswerKey:
    """Question text (whitespace collapsed) -> item, read from one file named by a spec setting (``qa-key``)."""

    setting: str
    items: dict[str, Keyed] = field(default_factory=dict)
    file: str | None = None

    def find(self, question: str) -> Keyed:
        found = self.items.get(squash(question))
        if found is None:
            kind = self.setting.removesuffix("-key")
            source = f"the {self.setting} {self.file}" if self.file else f"no {self.setting}=FILE in the graded spec"
            raise ValueError(f"graded: a {kind} question not in {source}: {question[:100]!r}")
        return found

    def others(self) -> list[Keyed]:
        """Every item, in file order (wrong answers are drawn from them)."""
        return list(self.items.values())


def key_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSON-lines file (gzip'd when it ends in .gz); bad input: one-line ValueError."""
    try:
        opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")
        with opened as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"graded: {path}: cannot read the answer key ({exc})") from None
    try:
        yield from json_objects(lines, comments=True)
    except BadLine as bad:
        what = f"not JSON ({bad.json_error})" if bad.json_error is not None else "expected a JSON object"
        raise ValueError(f"graded: {path}:{bad.lineno}: {what}") from None


def key_text(row: Mapping[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"graded: {where}: '{name}' must be a non-empty string")
    return value.strip()


def load_key(settings: Mapping[str, str], setting: str, item: Callable[[int, dict[str, Any], str], Keyed],
             folder_file: str | None = None) -> AnswerKey:
    """The answer key a spec setting names (empty when not set); ``item(index, row, where)`` reads one row; a folder
    is read as its ``folder_file``. The first item of a repeated question wins."""
    key = AnswerKey(setting)
    if setting not in settings:
        return key
    path = Path(settings[setting])
    if folder_file and path.is_dir():
        path = path / folder_file
    if not path.is_file():
        raise ValueError(f"graded: {setting}: {path}: no such file")
    for index, (number, row) in enumerate(key_rows(path)):
        where = f"{path}:{number}"
        key.items.setdefault(squash(key_text(row, "question", where)), item(index, row, where))
    key.file = str(path)
    return key


def wrong_answer(prompt: str, key: AnswerKey, golds: Sequence[str], match: Callable[[str, str], bool]) -> str:
    """Another item's answer that no gold answer matches (drawn from the key, starting at a hashed place)."""
    others = key.others()
    start = int(draw("wrong", prompt) * len(others))
    for item in others[start:] + others[:start]:
        candidate = item.answers[0]
        if not any(match(candidate, g) or match(g, candidate) for g in golds):
            return candidate
    return "I don't know."


def task(experiment: str, item: str, right: str, wrong: str, graded: bool = True) -> dict[str, Any]:
    """A grader's reading of one prompt, as the server takes it."""
    return {"experiment": experiment, "item": item, "right": right, "wrong": wrong, "graded": graded}
