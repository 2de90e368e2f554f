"""``longctx-data``: fetch and verify the experiments' corpora ahead of a run (a run itself never downloads).

``longctx-data fetch [NAME[:ARG] ...]`` gets every file of the named corpus sets (all of them by default)
into ``--dir`` (default ``$LONGCTX_DATA_DIR``, else ``<cache-dir>/corpora``, where runs look), as
``<corpus>/<file>``, with a progress bar, resuming an interrupted download, and checks each file's pinned
sha256. A file already found where a run looks (``$LONGCTX_DATA_DIR``, ``--dir``) is verified, not fetched.
``longctx-data list`` says where each file is found, or that it is missing.

Corpus sets come from the entry point group ``pytest_longctx.corpora`` (see ``pyproject.toml``): each names
a function ``(arg: str | None) -> list[CorpusFile]`` (``ARG`` after a colon, e.g. ``qa:2024-02-13`` for
another Federal Register issue), so an experiment of your own can declare its data the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import TextIO

from pytest_longctx.corpus.lookup import (
    DATA_DIR_ENV,
    CorpusFile,
    CorpusNotFound,
    download_file,
    sha256_of,
)
from pytest_longctx.errors import UsageError

#: Entry point group of corpus sets: name -> ``module:function(arg) -> list[CorpusFile]``.
GROUP = "pytest_longctx.corpora"


def corpus_sets() -> dict[str, str]:
    """name -> ``module:function`` of every installed corpus set."""
    return {ep.name: ep.value for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name)}


def files_of(name: str) -> list[CorpusFile]:
    """The files of ``NAME[:ARG]``; an unknown name or a bad ARG is a one-line :class:`UsageError`."""
    import importlib

    set_name, _, arg = name.partition(":")
    known = corpus_sets()
    if set_name not in known:
        raise UsageError(f"unknown corpus set {set_name!r}; known: {', '.join(known) or '(none installed)'}")
    module, _, attr = known[set_name].partition(":")
    files: list[CorpusFile] = getattr(importlib.import_module(module), attr)(arg or None)
    return files


def default_dir() -> Path:
    """``$LONGCTX_DATA_DIR``, else the default cache's ``corpora`` folder (``$LONGCTX_CACHE_DIR`` or .longctx-cache)."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    return Path(os.environ.get("LONGCTX_CACHE_DIR") or ".longctx-cache") / "corpora"


def found(spec: CorpusFile, folder: Path) -> Path | None:
    """Where a run finds ``spec`` among ``$LONGCTX_DATA_DIR`` and ``folder``, or None."""
    folders = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    for base in [*folders, folder]:
        for candidate in spec.candidates(base):
            if candidate.is_file():
                return candidate
    return None


class Bar:
    """A one-line progress bar on a terminal (redrawn at most 10 times a second); silent elsewhere."""

    def __init__(self, label: str, out: TextIO) -> None:
        self.label, self.out = label, out
        self.tty = out.isatty()
        self.started = self.last = time.monotonic()

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if not self.tty or (now - self.last < 0.1 and done != total):
            return
        self.last = now
        rate = done / max(now - self.started, 1e-6)
        if total:
            filled = int(30 * done / total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done / 1e6:.1f}/{total / 1e6:.1f} MB"
        else:
            bar = f"{done / 1e6:.1f} MB"
        self.out.write(f"\r  {self.label}  {bar}  {rate / 1e6:.1f} MB/s ")
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\r\033[K")
            self.out.flush()


def fetch(spec: CorpusFile, folder: Path, out: TextIO) -> str:
    """Get one file into ``folder/<corpus>/<file>`` (or verify the copy a run already finds): its status line."""
    have = found(spec, folder)
    if have is not None:
        if spec.sha256 is not None and (actual := sha256_of(have)) != spec.sha256:
            return (f"BAD   {spec.where}: {have} has sha256 {actual[:12]}..., expected {spec.sha256[:12]}...; "
                    "delete it and fetch again")
        checked = "sha256 ok" if spec.sha256 else "no pinned sha256"
        return f"ok    {spec.where}: {have} ({checked})"
    if spec.url is None:
        return f"MISS  {spec.where}: no download source; put it in {folder / spec.where}"
    bar = Bar(spec.where, out)
    try:
        path = download_file(spec, folder / spec.where, progress=bar)
    except CorpusNotFound as exc:
        return f"FAIL  {spec.where}: {exc}"
    finally:
        bar.close()
    checked = "sha256 ok" if spec.sha256 else f"sha256 {sha256_of(path)[:12]}... recorded"
    return f"got   {spec.where}: {path} ({path.stat().st_size:,} bytes, {checked})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longctx-data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    names = ", ".join(corpus_sets()) or "none installed"
    for command, text in (("fetch", "download and verify corpora (resumable)"),
                          ("list", "show where each corpus file is found, or that it is missing")):
        p = sub.add_parser(command, help=text)
        p.add_argument("names", nargs="*", metavar="NAME[:ARG]", help=f"corpus sets (default: all: {names})")
        p.add_argument("--dir", type=Path, default=None,
                       help=f"folder of corpora to fill (default: ${DATA_DIR_ENV}, else .longctx-cache/corpora)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    folder = args.dir or default_dir()
    try:
        specs = [spec for name in (args.names or list(corpus_sets())) for spec in files_of(name)]
    except UsageError as exc:
        print(f"longctx-data: {exc}", file=sys.stderr)
        return 2
    bad = 0
    for spec in specs:
        if args.command == "list":
            where = found(spec, folder)
            line = f"ok    {spec.where}: {where}" if where else f"MISS  {spec.where}: not in {folder}"
        else:
            line = fetch(spec, folder, sys.stderr)
        bad += not line.startswith(("ok", "got"))
        print(line, flush=True)
    if bad:
        print(f"longctx-data: {bad} of {len(specs)} files missing or bad", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
