"""Command line: generate and review the QA file of a documents folder.

    longctx-docs generate DIR --model SPEC [--per-doc 2] [--all] [--protocol source] [--paraphrase]
    longctx-docs review DIR [--approve ID ...] [--reject ID ...] [--approve-all]
                            [--approve-paraphrase ID ...] [--reject-paraphrase ID ...]

Bad input is one line on stderr (exit 2), never a traceback. ``generate`` exits 1 when a
document's reply could not be used (the other documents' items are saved).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pytest_longctx import ModelClient, ModelSpec, missing_key_message, parse_model_spec, provider_of
from pytest_longctx.errors import LongctxError, UsageError
from pytest_longctx.experiments.docs.documents import Document, document_paths, load_documents
from pytest_longctx.experiments.docs.generate import TEMPLATE, GenerationStopped
from pytest_longctx.experiments.docs.qa_file import (
    QAItem,
    add_generated,
    effective_status,
    load_qa,
    needs_generation,
    qa_path,
    refresh,
    save_qa,
    set_status,
    status_counts,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longctx-docs",
                                     description="Generate and review question/answer items for your documents.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="ask a model for question/answer pairs per document (saved as pending)")
    gen.add_argument("dir", type=Path, help="folder of .txt/.md documents")
    gen.add_argument("--model", required=True,
                     help="generator model as provider/name, e.g. anthropic/claude-sonnet-4-5")
    gen.add_argument("--per-doc", type=int, default=2, help="pairs to ask for per document (default: 2)")
    gen.add_argument("--protocol", choices=("longctx", "source"), default="longctx",
                     help="longctx (this suite's prompt) or source (the Snorkel write-up's prompt, one pair per "
                          "document) (default: longctx)")
    gen.add_argument("--all", action="store_true",
                     help="generate for every document, not only those without a pending or approved item")
    gen.add_argument("--paraphrase", action="store_true",
                     help="instead of new items: ask for a low-overlap paraphrase of every approved or pending item "
                          "without one (every item with --all), measure its overlap, save it pending")
    gen.add_argument("--retries", type=int, default=1, help="repair turns after an unusable reply (default: 1)")
    gen.add_argument("--concurrency", type=int, default=4, help="requests in flight (default: 4)")
    gen.add_argument("--cache-dir", type=Path, default=None,
                     help="response cache (default: $LONGCTX_CACHE_DIR or .longctx-cache)")
    gen.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    rev = sub.add_parser("review", help="list items with their status; approve or reject them")
    rev.add_argument("dir", type=Path, help="folder of .txt/.md documents")
    rev.add_argument("--approve", nargs="+", default=[], metavar="ID", help="approve these items")
    rev.add_argument("--reject", nargs="+", default=[], metavar="ID", help="reject these items")
    rev.add_argument("--approve-all", action="store_true", help="approve every pending item (stale ones need an id)")
    rev.add_argument("--approve-paraphrase", nargs="+", default=[], metavar="ID",
                     help="approve these items' paraphrases (the low-overlap question)")
    rev.add_argument("--reject-paraphrase", nargs="+", default=[], metavar="ID",
                     help="reject these items' paraphrases")
    rev.add_argument("--status", choices=("pending", "approved", "rejected", "stale", "missing"),
                     help="list only items with this status")
    for command in (gen, rev):
        command.add_argument("--qa-file", type=Path, default=None, help="QA file (default: DIR/longctx-qa.jsonl)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _generate(args) if args.command == "generate" else _review(args)
    except LongctxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `review DIR | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _load(args: argparse.Namespace) -> tuple[dict[str, Document], Path, list[QAItem]]:
    docs = {d.name: d for d in load_documents(args.dir)}
    path = args.qa_file or qa_path(args.dir)
    return docs, path, load_qa(path)


def _counts(items: list[QAItem], docs: dict[str, Document]) -> str:
    return ", ".join(f"{n} {s}" for s, n in status_counts(items, docs).items()) or "no items"


def _generate(args: argparse.Namespace) -> int:
    spec = parse_model_spec(args.model, flag="--model")
    if args.per_doc < 1 or args.retries < 0 or args.concurrency < 1:
        print("error: --per-doc and --concurrency must be >= 1, --retries >= 0", file=sys.stderr)
        return 2
    if missing_key_message(spec.provider) is not None:
        provider = provider_of(spec)
        raise UsageError(f"{provider.key_env} is not set: export your {provider.label} API key to generate with "
                         f"{spec.spec}")
    if args.qa_file is not None:  # before it is read: a folder or a missing folder is named as the option
        _check_output(args.qa_file, "--qa-file")
    template = TEMPLATE
    if args.protocol == "source":
        from pytest_longctx.experiments.docs.source import GENERATE, PAIRS_PER_DOC

        args.per_doc, template = PAIRS_PER_DOC, GENERATE.ref
    docs, path, items = _load(args)
    if args.qa_file is None:
        _check_output(path, "QA file")
    if args.paraphrase:
        return _paraphrase(args, spec, docs, path, items)
    for skipped in document_paths(args.dir)[1]:
        print(f"skipped {skipped}: not a .txt/.md document")
    for line in refresh(items, docs):
        print(line)
    targets = [d for d in docs.values() if args.all or needs_generation(items, d)]
    print(f"{args.dir}: {len(docs)} documents, {len(targets)} to generate for with {spec.spec}")
    stopped: str | None = None
    try:
        results = asyncio.run(_run(spec, targets, args)) if targets else []
    except GenerationStopped as exc:  # auth, spend limit: keep what finished before it, then stop
        results, stopped = exc.results, str(exc)
    failed = 0
    for result in results:
        if result.error is not None:
            failed += 1
            raw = " ".join(result.raw.split())[:120]
            print(f"FAILED {result.doc.name}: {result.error}; reply began: {raw!r}")
            continue
        added, dupes = add_generated(items, result.doc, result.pairs, f"{spec.spec} ({template})")
        extra = f", {dupes} duplicate(s) skipped" if dupes else ""
        extra += f" (the reply had {len(result.pairs)} of the {args.per_doc} pairs asked for)" \
            if len(result.pairs) < args.per_doc else ""
        print(f"{result.doc.name}: {len(added)} new pending item(s){extra}")
        for problem in result.problems:
            print(f"  left out {problem}")
    if items or path.exists():
        save_qa(path, items)
        print(f"wrote {path}: {_counts(items, docs)}")
    if stopped is not None:
        print(f"error: {stopped}; {len(results)} document(s) finished before it are saved, run generate again "
              "to resume", file=sys.stderr)
        return 2
    if failed:
        print(f"{failed} document(s) failed; run generate again to retry them (they have no items yet)")
    print(f"next: read {path.name}, edit as needed, then `longctx-docs review {args.dir}`")
    return 1 if failed else 0


def _check_output(path: Path, what: str) -> None:
    """Before anything is generated: the QA file can be written (its folder exists and is writable)."""
    from pytest_longctx.util.fsutil import output_file_problem

    problem = output_file_problem(path, "longctx-qa.jsonl", parent_must_exist=True)
    if problem is not None:
        raise UsageError(f"{what}: {problem}")


def _paraphrase(args: argparse.Namespace, spec: ModelSpec, docs: dict[str, Document], path: Path,
                items: list[QAItem]) -> int:
    """``generate --paraphrase``: a pending low-overlap paraphrase for the items without one (all with --all)."""
    from pytest_longctx.experiments.docs.paraphrase import TEMPLATE as PARAPHRASE
    from pytest_longctx.experiments.docs.paraphrase import attach, rewrite_all

    targets = [it for it in items if effective_status(it, docs) in ("approved", "pending")
               and (args.all or it.paraphrase is None)]
    print(f"{args.dir}: {len(targets)} item(s) to paraphrase with {spec.spec}")
    if not targets:
        return 0
    found = asyncio.run(_run(spec, [], args, lambda client: rewrite_all(client, targets, docs)))
    lines = attach(found, docs, f"{spec.spec} ({PARAPHRASE})")
    print("\n".join(lines))
    save_qa(path, items)
    print(f"wrote {path}; next: `longctx-docs review {args.dir} --approve-paraphrase ID ...` (flagged ones: rewrite "
          "them by hand or reject them)")
    return 1 if any(line.startswith("FAILED") for line in lines) else 0


async def _run(spec: ModelSpec, targets: list[Document], args: argparse.Namespace,
               work: Callable[[ModelClient], Awaitable[Any]] | None = None) -> Any:
    """Generate for ``targets`` (or run ``work`` with the client) against the model, a local one's server started."""
    from pytest_longctx import ModelClient, ResponseCache, build_backend, start_model_server
    from pytest_longctx.experiments.docs.generate import generate_all

    cache_dir = args.cache_dir or Path(os.environ.get("LONGCTX_CACHE_DIR", ".longctx-cache"))
    server = None
    options: dict[str, object] = {}
    if provider_of(spec).local_server:  # a server of its own, even when the environment names one
        options["base_url"], server = start_model_server(spec, cache_dir, share_running=False)
    try:
        backend = build_backend(spec, context_window=spec.profile.context_window, **options)
        client = ModelClient(backend, None if args.no_cache else ResponseCache(cache_dir),
                             "off" if args.no_cache else "on", args.concurrency)
        try:
            if work is not None:
                return await work(client)
            return await generate_all(client, targets, args.per_doc, args.retries, args.protocol)
        finally:
            await backend.aclose()
    finally:
        if server is not None:
            server.stop()


def _review(args: argparse.Namespace) -> int:
    docs, path, items = _load(args)
    if not items:
        print(f"error: {path}: no QA items; run `longctx-docs generate {args.dir} --model SPEC` "
              "or write the file by hand", file=sys.stderr)
        return 2
    before = [it.to_json() for it in items]
    for line in refresh(items, docs):  # also pins hand-written items to their document's current text
        print(line)
    both = sorted(set(args.approve) & set(args.reject))
    if both:
        print(f"error: {', '.join(both)} both approved and rejected; pick one", file=sys.stderr)
        return 2
    changed = set_status(items, args.approve, "approved", docs) + set_status(items, args.reject, "rejected", docs)
    changed += review_paraphrases(items, args.approve_paraphrase, "approved")
    changed += review_paraphrases(items, args.reject_paraphrase, "rejected")
    if args.approve_all:
        pending = [it.id for it in items if effective_status(it, docs) == "pending"]
        changed += set_status(items, pending, "approved", docs)
    if [it.to_json() for it in items] != before:
        save_qa(path, items)
    for item in sorted(items, key=lambda it: (it.doc, it.id)):
        status = effective_status(item, docs)
        if args.status and status != args.status:
            continue
        print(f"[{status}] {item.id}  ({item.doc})")
        print(textwrap.indent(f"Q: {item.question}\nA: {item.answer}" + (f"\nnote: {item.note}" if item.note else "")
                              + _paraphrase_line(item), "    "))
    if changed:
        print(f"updated {len(changed)} item(s) in {path}")
    print(f"{path}: {_counts(items, docs)}")
    return 0


def _paraphrase_line(item: QAItem) -> str:
    p = item.paraphrase
    if p is None:
        return ""
    return (f"\nP: {p.question}  [paraphrase {p.status}, content overlap {p.content_overlap}, BM25 {p.bm25}"
            f"{', FLAGGED' if p.flagged else ''}]" + (f"\n   {p.note}" if p.note else ""))


def review_paraphrases(items: list[QAItem], ids: list[str], status: str) -> list[QAItem]:
    """Set the paraphrase's review state of the named items (an id without a paraphrase is a UsageError)."""
    by_id = {it.id: it for it in items}
    wrong = [i for i in ids if i not in by_id or by_id[i].paraphrase is None]
    if wrong:
        raise UsageError(f"no paraphrase for item id(s) {', '.join(wrong)}; `generate DIR --model SPEC --paraphrase` "
                         "writes them, `review DIR` lists them")
    for item_id in ids:
        paraphrase = by_id[item_id].paraphrase
        assert paraphrase is not None
        paraphrase.status = status
    return [by_id[i] for i in ids]


if __name__ == "__main__":
    sys.exit(main())
