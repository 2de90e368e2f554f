"""Federal Register daily issues: locate (see :mod:`.lookup`), split into agency sections.

The recipe follows Anthropic's long-context QA study: the issue's plain text is split on
``BILLING CODE``, the preamble before the first agency heading is dropped, and sections of
200 to 5000 tokens are kept. Plain text equals ``BeautifulSoup(xml, "xml").get_text()``
(verified byte for byte on the 2024-02-12 issue) but uses only the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.corpus.lookup import CorpusFile, find_corpus
from pytest_longctx.corpus.tokens import TokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.util.fsutil import atomic_write_text

GOVINFO_URL = "https://www.govinfo.gov/content/pkg/FR-{date}/xml/FR-{date}.xml"
#: Environment variable overriding the download URL (``{date}`` is replaced), e.g. a mirror or a test server.
FR_URL_ENV = "LONGCTX_FR_URL"
#: Issues the shipped question sets were written against: where that exact file is, and its sha256.
#: (GPO re-encoded issues in March 2024, en dashes replaced by hyphens, so govinfo may serve other bytes;
#: the original is fetched from GPO's bulk-data repository at the commit that added it.)
PINNED = {
    "2024-02-12": (
        "https://raw.githubusercontent.com/usgpo/bulk-data/92b8a7b1eec1adcbd7bbf470116a8cfd399fe6c2/"
        "ndash-changes-March2024/current/FR-{date}.xml",
        "38063a8a4affb2fb8d270dd8305b7a6e28eb1270900ebd2a5ab58d4200f7f3c4",
    ),
}
MIN_TOKENS = 200
MAX_TOKENS = 5000
FIRST_HEADING = "DEPARTMENT OF TRANSPORTATION"
_FR_DOC = re.compile(r"\[FR Doc\.\s*([0-9]{4})\s*[\u2013\-]\s*([0-9]+)")
_SPLIT_MARK = "BILLING CODE"
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class Section:
    """One agency section of an issue, with its token count under ``tokenizer``."""

    id: str
    index: int
    text: str
    tokens: int


@dataclass(frozen=True)
class Issue:
    """The kept sections of one daily issue and the facts a report needs about them."""

    date: str
    source: str
    sha256: str
    tokenizer: str
    raw_sections: int
    sections: tuple[Section, ...]

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    def by_id(self) -> dict[str, Section]:
        return {s.id: s for s in self.sections}


def plain_text(xml_bytes: bytes) -> str:
    """The document's text, with whitespace-only runs folded as bs4's XML builder does."""
    root = ET.fromstring(xml_bytes)  # noqa: S314 - govinfo's public XML; the stdlib parser expands no external entities
    parts = []
    for piece in root.itertext():
        if piece.strip(" \t\n\r"):
            parts.append(piece)
        else:
            parts.append("\n" if "\n" in piece else piece)
    return "".join(parts)


def raw_chunks(text: str) -> list[str]:
    """Split on ``BILLING CODE`` and drop the preamble before the first agency heading."""
    chunks = text.split(_SPLIT_MARK)
    start = chunks[0].find(FIRST_HEADING)
    if start >= 0:
        chunks[0] = chunks[0][start:]
    return chunks


def section_id(chunk: str, index: int) -> str:
    """The chunk's FR document number (the last ``[FR Doc. ...]`` in it), else its index."""
    found = _FR_DOC.findall(chunk)
    if not found:
        return f"chunk-{index:03d}"
    year, number = found[-1]
    return f"{year}-{number}"


def split_sections(text: str, counter: TokenCounter) -> tuple[int, list[Section]]:
    """Return the raw chunk count and the kept sections with unique ids."""
    chunks = raw_chunks(text)
    kept: list[Section] = []
    seen: set[str] = set()
    for index, chunk in enumerate(chunks):
        tokens = counter.count(chunk)
        if not MIN_TOKENS < tokens <= MAX_TOKENS:
            continue
        sid = section_id(chunk, index)
        if sid in seen:
            sid = f"{sid}#{index}"
        seen.add(sid)
        kept.append(Section(sid, index, chunk, tokens))
    return len(chunks), kept


def fr_issue(date: str) -> CorpusFile:
    """The corpus file of one daily issue: govinfo (or ``$LONGCTX_FR_URL``) and, for pinned issues, its sha256."""
    pinned = PINNED.get(date)
    template = os.environ.get(FR_URL_ENV) or (pinned[0] if pinned else GOVINFO_URL)
    return CorpusFile(corpus=f"federal_register_{date}", file=f"FR-{date}.xml", title=f"Federal Register {date}",
                      url=template.format(date=date), sha256=pinned[1] if pinned else None)


def corpora(dates: str | None) -> list[CorpusFile]:
    """``longctx-data fetch qa[:DATE,DATE]``: the issues (default: the one the shipped question set is about)."""
    from pytest_longctx.experiments.qa.options import FR_DATE, check_fr_dates

    text = dates or str(FR_DATE.default)
    check_fr_dates(text, flag="qa:DATE")
    return [fr_issue(d.strip()) for d in text.split(",")]


def locate(date: str, *, path: str | None, data_dir: str | None, cache_dir: Path, download: bool = True) -> Path:
    """Find ``FR-<date>.xml``: explicit path, data dir (option or env), cache, else download (see :mod:`.lookup`)."""
    if path:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"longctx_fr_path: {p} does not exist; point it at an FR-<date>.xml file")
        return p
    return find_corpus(fr_issue(date), data_dir=data_dir, cache_dir=cache_dir, download=download)


def load_issue(xml_path: Path, date: str, counter: TokenCounter, cache_dir: Path) -> Issue:
    """Split an issue into sections, reusing a JSON cache keyed by file hash and tokenizer."""
    data = xml_path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(f"{_CACHE_FORMAT}|{digest}|{counter.name}".encode()).hexdigest()[:16]
    cache_file = cache_dir / f"sections-{date}-{key}.json"
    if cache_file.is_file():
        try:
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
            return Issue(
                date=date,
                source=str(xml_path),
                sha256=digest,
                tokenizer=counter.name,
                raw_sections=cached["raw_sections"],
                sections=tuple(Section(**s) for s in cached["sections"]),
            )
        except (ValueError, KeyError, TypeError):
            pass  # a corrupt cache file is rebuilt below
    try:
        text = plain_text(data)
    except ET.ParseError as exc:
        raise UsageError(f"{xml_path}: not valid Federal Register XML ({exc}); re-download it") from None
    raw, sections = split_sections(text, counter)
    payload = {"raw_sections": raw, "sections": [s.__dict__ for s in sections]}
    atomic_write_text(cache_file, json.dumps(payload))
    return Issue(date, str(xml_path), digest, counter.name, raw, tuple(sections))
