"""Finding a corpus file the way users provide it: data dir, ``$LONGCTX_DATA_DIR``, the cache, a download.

A corpus file is named by a :class:`CorpusFile` (corpus folder name, file path inside it, title for
messages, download URL and an optional pinned sha256). :func:`find_corpus` looks, in this order, in

1. the data dir given as an option (``--longctx-data-dir``, ``--data-dir``),
2. the folder named by ``$LONGCTX_DATA_DIR``,
3. the cache folder (``<cache-dir>/corpora``, where ``longctx-data fetch`` puts files),

and else (with ``download=True``) downloads the file once into the cache. In each folder the file may sit
directly (``DIR/FR-2024-02-12.xml``), in the corpus folder (``DIR/<corpus>/<file>``) or in its ``current``
folder (``DIR/<corpus>/current/<file>``), so a data dir may be one corpus's folder or a folder of
corpora such as ``../shared/corpora``. Files in data dirs are the user's own and are not checked.
A downloaded file's sha256 is recorded beside it (``<file>.sha256``) and checked against the pinned
one when there is one; a cached file whose bytes no longer match is re-downloaded, or reported
when the download fails. Every failure is one :class:`CorpusNotFound` line saying what to do.
Downloads (:func:`download_file`) resume a partial ``<file>.part`` and report progress to a callback.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.errors import UsageError
from pytest_longctx.util.fsutil import atomic_write_text

#: Environment variable naming a data dir (a corpus folder or a folder of corpora).
DATA_DIR_ENV = "LONGCTX_DATA_DIR"
#: Seconds a download may take to connect and between reads.
DOWNLOAD_TIMEOUT_S = 60.0
#: Bytes read at a time while downloading (and between two progress reports).
BLOCK = 1 << 16

#: ``progress(done, total)``: bytes of the file on disk so far, and its size when the server said it.
Progress = Callable[[int, "int | None"], None]


class CorpusNotFound(UsageError):
    """A corpus file is in no data dir or cache and could not be downloaded (or was corrupt)."""

    def __init__(self, message: str, spec: CorpusFile | None = None, looked: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: The file that was looked for (None: a download failure before the lookup's message was built).
        self.spec = spec
        #: Every place it was looked for, as :func:`looked_in` says them (empty: not known).
        self.looked = looked


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus and how to get it."""

    #: Folder name of the corpus in a folder of corpora, e.g. ``federal_register_2024-02-12``.
    corpus: str
    #: Path of the file inside the corpus folder, e.g. ``FR-2024-02-12.xml``.
    file: str
    #: What messages call it, e.g. ``Federal Register 2024-02-12``.
    title: str
    #: Where to download it from (``None``: no download; the user must provide it).
    url: str | None = None
    #: The file's sha256 when one exact version is expected (checked on download and in the cache).
    sha256: str | None = None

    def candidates(self, folder: Path) -> list[Path]:
        """Where the file may sit inside a data dir."""
        return [folder / self.file, folder / self.corpus / self.file, folder / self.corpus / "current" / self.file]

    @property
    def where(self) -> str:
        """Its path in a folder of corpora, e.g. ``federal_register_2024-02-12/FR-2024-02-12.xml``."""
        return f"{self.corpus}/{self.file}"


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_corpus(spec: CorpusFile, *, data_dir: str | None, cache_dir: Path, download: bool = True) -> Path:
    """The path of ``spec``'s file: data dir, ``$LONGCTX_DATA_DIR``, cache, else a download into the cache.

    Raises:
        CorpusNotFound: one line naming the file, where it was looked for, and how to provide it.
    """
    for folder in (data_dir, os.environ.get(DATA_DIR_ENV)):
        if folder:
            for candidate in spec.candidates(Path(folder)):
                if candidate.is_file():
                    return candidate
    problem = None
    for cached in spec.candidates(cache_dir):
        if cached.is_file():
            problem = check_cached(spec, cached)
            if problem is None:
                return cached
    looked = tuple(looked_in(data_dir, cache_dir))
    if not download or spec.url is None:
        raise CorpusNotFound(_not_found(spec, data_dir, cache_dir, problem or "no download source"), spec, looked)
    try:
        return download_file(spec, cache_dir / spec.file)
    except CorpusNotFound as exc:
        why = f"{problem}; {exc}" if problem else str(exc)
        raise CorpusNotFound(_not_found(spec, data_dir, cache_dir, why), spec, looked) from None


def check_cached(spec: CorpusFile, cached: Path) -> str | None:
    """Why a downloaded copy cannot be used (its bytes differ from the recorded or pinned sha256), or None."""
    record = cached.with_name(cached.name + ".sha256")
    recorded = record.read_text(encoding="utf-8").strip() if record.is_file() else None
    expected = spec.sha256 or recorded
    if expected is None:
        return None  # put there by hand, as the not-found message suggests
    actual = sha256_of(cached)
    if actual == expected:
        return None
    return f"cached {cached} is corrupt (sha256 {actual[:12]}..., expected {expected[:12]}...)"


def download_file(spec: CorpusFile, target: Path, progress: Progress | None = None) -> Path:
    """Fetch the file into ``target`` (resuming ``<target>.part``), check the pinned sha256, record its own.

    A partial file left by an interrupted download is continued with an HTTP range request when the server
    honours it (else fetched whole); a finished file whose bytes do not match the pinned sha256 is deleted.
    """
    url = str(spec.url)
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as resp:  # noqa: S310 - the spec's URL
            resumed = have > 0 and resp.status == 206
            length = resp.headers.get("Content-Length")
            total = int(length) + (have if resumed else 0) if length and length.isdigit() else None
            done = have if resumed else 0
            with part.open("ab" if resumed else "wb") as fh:
                while block := resp.read(BLOCK):
                    fh.write(block)
                    done += len(block)
                    if progress is not None:
                        progress(done, total)
            if total is not None and done < total:  # the connection closed early (read() does not raise then)
                raise ConnectionError(f"the connection closed after {done:,} of {total:,} bytes")
    except urllib.error.HTTPError as exc:
        if not (exc.code == 416 and have):  # 416: nothing after ``have`` bytes, so the part file is complete
            raise CorpusNotFound(f"download from {url} failed (HTTP {exc.code} {exc.reason})") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        kept = f"; {part.stat().st_size:,} bytes kept in {part} for the next try" if part.is_file() else ""
        raise CorpusNotFound(f"download from {url} failed ({reason}){kept}") from None
    actual = sha256_of(part)
    if spec.sha256 is not None and actual != spec.sha256:
        part.unlink(missing_ok=True)
        raise CorpusNotFound(f"download from {url} has sha256 {actual[:12]}..., expected {spec.sha256[:12]}... "
                             "(a different version of the file)")
    os.replace(part, target)
    atomic_write_text(target.with_name(target.name + ".sha256"), actual + "\n")
    return target


def looked_in(data_dir: str | None, cache_dir: Path) -> list[str]:
    """Every folder :func:`find_corpus` looks in, in its order, as a message says them: ``--longctx-data-dir
    DIR``, ``$LONGCTX_DATA_DIR=DIR`` (each marked ``(no such folder)`` when it is none; an unset one is
    ``$LONGCTX_DATA_DIR (not set)``), then ``the cache DIR``."""
    looked = []
    if data_dir:
        looked.append(f"--longctx-data-dir {data_dir}" + ("" if Path(data_dir).is_dir() else " (no such folder)"))
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        looked.append(f"${DATA_DIR_ENV}={env}" + ("" if Path(env).is_dir() else " (no such folder)"))
    else:
        looked.append(f"${DATA_DIR_ENV} (not set)")
    looked.append(f"the cache {cache_dir}")
    return looked


def _not_found(spec: CorpusFile, data_dir: str | None, cache_dir: Path, why: str) -> str:
    looked = looked_in(data_dir, cache_dir)
    return (f"{spec.title} not found ({spec.file} is not in {', '.join(looked)}; {why}): "
            f"pass --longctx-data-dir DIR or set {DATA_DIR_ENV}=DIR to a folder holding it "
            f"(or {spec.corpus}/{spec.file}), or put it in {cache_dir}")
