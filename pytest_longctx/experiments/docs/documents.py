"""A folder of the user's own documents: one document per file, plain text or Markdown.

A document is named by its path relative to the folder (``notes/menu.md``) and pinned by a short
content hash (``doc_sha``), so review decisions can tell when the text changed underneath them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.errors import UsageError

#: File endings read as documents; anything else in the folder is listed as skipped.
DOC_SUFFIXES = (".txt", ".text", ".md", ".markdown", ".rst")
#: The reviewed question/answer file kept beside the documents.
QA_FILENAME = "longctx-qa.jsonl"


@dataclass(frozen=True)
class Document:
    """One file's text, its name inside the folder, and its content hash."""

    name: str
    text: str
    sha: str

    @property
    def title(self) -> str:
        """The first Markdown heading, else the file name."""
        for line in self.text.splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip() or self.name
            if line.strip():
                break
        return self.name


def doc_sha(text: str) -> str:
    """Stable hash of a document's content (line endings and trailing blanks do not count)."""
    canonical = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip()
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def document_paths(folder: Path) -> tuple[list[Path], list[Path]]:
    """(document files, skipped files) under ``folder``, sorted; hidden files and ``longctx-*.jsonl`` are ignored."""
    docs: list[Path] = []
    skipped: list[Path] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts) or _is_qa_file(path):
            continue
        (docs if path.suffix.lower() in DOC_SUFFIXES else skipped).append(path)
    return docs, skipped


def load_documents(folder: Path) -> list[Document]:
    """Read every document in ``folder``; a bad folder or file is a one-line UsageError."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder; expected a folder of .txt/.md documents, one document per file")
    out: list[Document] = []
    for path in document_paths(folder)[0]:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{path}: not UTF-8 text; save it as UTF-8 or remove it from the folder") from None
        if not text.strip():
            raise UsageError(f"{path}: empty document; add text or remove the file")
        text = text.replace("\r\n", "\n").strip()
        out.append(Document(name=path.relative_to(folder).as_posix(), text=text, sha=doc_sha(text)))
    if not out:
        raise UsageError(f"{folder}: no documents ({', '.join(DOC_SUFFIXES)}); add one document per file")
    return out


def _is_qa_file(path: Path) -> bool:
    return path.name.startswith("longctx-") and path.suffix == ".jsonl"
