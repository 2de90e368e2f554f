"""The experiment's own data: needle / question pairs linked by one hop, their categories, the pool of names.

``fixtures/needle/pairs.jsonl`` holds one pair a line: ``id``, ``category``, ``key`` (the word the question
names), ``needle`` (the non-literal sentence: the key is reached by one hop of common knowledge), ``literal``
(the same fact in the question's words) and ``hop`` (the fact the hop needs). Both sentences carry ``{name}``,
a character drawn from ``names.txt`` at build time. ``categories.json`` gives each category its question and
its distractors (sentences that share the question's words and answer a near question). See SOURCE.md there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx import UsageError
from pytest_longctx.util.jsonl import read_jsonl

#: The data shipped with the project (the repository's fixtures/needle).
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "needle"
VARIANTS = ("nonliteral", "literal")
NAME_SLOT = "{name}"


@dataclass(frozen=True)
class Category:
    """A kind of hop: the question asked of its pairs and the distractors that share the question's words."""

    name: str
    question: str
    distractors: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    """One needle / question pair (see the module docstring)."""

    id: str
    category: str
    key: str
    needle: str
    literal: str
    hop: str
    question: str
    distractors: tuple[str, ...]

    def sentence(self, variant: str, name: str) -> str:
        """The needle of ``variant`` (``nonliteral`` or ``literal``) naming ``name``."""
        text = self.needle if variant == "nonliteral" else self.literal
        return text.replace(NAME_SLOT, name)

    def distractor(self, index: int, name: str) -> str:
        """Distractor ``index`` of the pair's category, about the pair's key, naming ``name``."""
        return self.distractors[index].replace("{key}", self.key).replace(NAME_SLOT, name)


@dataclass(frozen=True)
class NeedleData:
    """Every pair (in file order) and the pool of names."""

    pairs: tuple[Pair, ...]
    names: tuple[str, ...]

    def by_question(self) -> dict[str, Pair]:
        return {p.question: p for p in self.pairs}


def _fail(path: Path, line: int, what: str) -> UsageError:
    return UsageError(f"{path}:{line}: {what}; fix the line (see {path.parent / 'SOURCE.md'})")


def load_categories(folder: Path) -> dict[str, Category]:
    path = folder / "categories.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: Category(name, str(c["question"]), tuple(str(d) for d in c["distractors"]))
            for name, c in sorted(raw.items())}


def load_data(folder: Path = FIXTURES) -> NeedleData:
    """Read and check the pairs, categories and names; bad input is a one-line :class:`UsageError`."""
    if not (folder / "pairs.jsonl").is_file():
        raise UsageError(f"{folder / 'pairs.jsonl'}: no such file; the needle experiment ships it in fixtures/needle")
    categories = load_categories(folder)
    names = tuple(n.strip() for n in (folder / "names.txt").read_text(encoding="utf-8").splitlines() if n.strip())
    path = folder / "pairs.jsonl"
    pairs: list[Pair] = []
    for number, row in read_jsonl(path):  # a line that is no JSON object is a one-line error too
        category = categories.get(str(row.get("category")))
        if category is None:
            raise _fail(path, number, f"unknown category {row.get('category')!r} (known: {', '.join(categories)})")
        fields = {k: str(row.get(k) or "") for k in ("id", "key", "needle", "literal", "hop")}
        missing = [k for k, v in fields.items() if not v]
        if missing:
            raise _fail(path, number, f"'{missing[0]}' is missing")
        if NAME_SLOT not in fields["needle"] or NAME_SLOT not in fields["literal"]:
            raise _fail(path, number, "needle and literal must each name {name}")
        pairs.append(Pair(**fields, category=category.name,
                          question=category.question.replace("{key}", fields["key"]),
                          distractors=category.distractors))
    return NeedleData(tuple(pairs), names)


def words_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern finding any of ``words`` as a whole word (case-insensitive)."""
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)", re.I)


def mentions(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` holds any of ``words`` as a whole word (case-insensitive)."""
    return bool(words_pattern(words).search(text))
