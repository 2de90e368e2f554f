"""Command line for the Federal Register question sets.

    longctx-qa generate --date 2024-02-12 --model anthropic/claude-sonnet-4-5
        [--data-dir DIR] [--out PATH] [--sections N] [--section ID ...] [--concurrency 8]
        [--cache-dir DIR] [--no-cache]
    longctx-qa stats --date 2024-02-12 [--data-dir DIR] [--list]
    longctx-qa validate PATH [--date 2024-02-12] [--data-dir DIR]

``generate`` writes each section's kept and rejected items as soon as its reply is checked, and
skips sections that already have a line in either file, so an interrupted run is resumed by
running the same command again.

Exit codes: 0 done; 1 some section's model call failed (``generate``, rerun to retry it) or the
file has problems (``validate``); 2 bad input or a fatal API error, as one line on stderr; 130
interrupted (finished sections are saved).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import NoReturn

from pytest_longctx import ModelSpec, parse_model_spec
from pytest_longctx.corpus.lookup import DATA_DIR_ENV
from pytest_longctx.errors import FatalBackendError, LongctxError, UsageError
from pytest_longctx.experiments.qa.federal_register import MAX_TOKENS, MIN_TOKENS, Issue, Section
from pytest_longctx.experiments.qa.generate import Outcome, OutputFiles, generate_all, open_issue
from pytest_longctx.experiments.qa.generate_parse import item_problems
from pytest_longctx.experiments.qa.generate_prompt import (
    EXAMPLE_DATE,
    EXAMPLES_FILE,
    Example,
    load_examples,
    pick_examples,
)
from pytest_longctx.experiments.qa.questions import Question, load_questions, longest_answer_share, validate

PROG = "longctx-qa"
_DATE_IN_NAME = re.compile(r"FR-(\d{4}-\d{2}-\d{2})")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def _date(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat() if len(text) == 10 else _bad_date(text)
    except ValueError:
        return _bad_date(text)


def _bad_date(text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"expected an issue date as YYYY-MM-DD, got {text!r}")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Question sets for Federal Register issues: generate, count, validate.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write 4-option questions for every kept section with a Claude model")
    gen.add_argument("--model", required=True, help="generator model, anthropic/<claude-model-id>")
    gen.add_argument("--out", type=Path, default=None,
                     help="output JSONL (default: fixtures/questions/FR-<date>.generated.jsonl); rejected items "
                          "go to <out without .jsonl>.rejected.jsonl. A section with a line in either file is "
                          "skipped (delete its lines to generate it again)")
    gen.add_argument("--sections", type=_positive, default=None, metavar="N",
                     help="only the first N kept sections (default: all)")
    gen.add_argument("--section", action="append", default=[], metavar="ID",
                     help="only this section (repeatable; ids from `stats --list`)")
    gen.add_argument("--concurrency", type=_positive, default=8, help="requests in flight (default: 8)")
    gen.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    stats = sub.add_parser("stats", help="section count and token totals of an issue")
    stats.add_argument("--list", action="store_true", help="also list every kept section: id, tokens, heading")
    val = sub.add_parser("validate", help="check a question file against its issue; exit 1 on problems")
    val.add_argument("path", type=Path, help="JSONL question file")
    for command in (gen, stats, val):
        default = " (default: from the file name)" if command is val else ""
        command.add_argument("--date", type=_date, required=command is not val, help=f"issue date YYYY-MM-DD{default}")
        command.add_argument("--data-dir", default=None,
                             help=f"folder holding FR-<date>.xml (default: ${DATA_DIR_ENV}, then the cache, "
                                  "then a download from govinfo.gov)")
        command.add_argument("--cache-dir", type=Path, default=None,
                             help="cache folder (default: $LONGCTX_CACHE_DIR or .longctx-cache); issues go "
                                  "to <cache>/corpora")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"generate": _generate, "stats": _stats, "validate": _validate}
    try:
        return commands[args.command](args)
    except FatalBackendError as exc:
        print(f"error: {exc}; finished sections are saved, rerun to resume", file=sys.stderr)
        return 2
    except LongctxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished sections are saved, rerun to resume", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _cache_dir(args: argparse.Namespace) -> Path:
    return Path(args.cache_dir or os.environ.get("LONGCTX_CACHE_DIR") or ".longctx-cache")


def _select(issue: Issue, ids: list[str], first: int | None) -> list[Section]:
    by_id = issue.by_id()
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise UsageError(f"--section: {', '.join(unknown)} is not a kept section of FR {issue.date}; list them "
                         f"with `{PROG} stats --date {issue.date} --list`")
    chosen = [s for s in issue.sections if s.id in ids] if ids else list(issue.sections)
    return chosen[:first] if first else chosen


def _examples(args: argparse.Namespace, issue: Issue, cache_dir: Path) -> list[Example]:
    if not EXAMPLES_FILE.is_file():
        raise UsageError(f"{EXAMPLES_FILE}: the team-written example set is missing; restore it from the repository")
    example_issue = issue
    if issue.date != EXAMPLE_DATE:
        try:
            example_issue = open_issue(EXAMPLE_DATE, args.data_dir, cache_dir)
        except UsageError as exc:
            raise UsageError(f"few-shot examples: {exc}") from None
    return load_examples(load_questions(EXAMPLES_FILE), {s.id: s.text for s in example_issue.sections})


def _generate(args: argparse.Namespace) -> int:
    spec = parse_model_spec(args.model, flag="--model")
    if spec.provider != "anthropic":
        raise UsageError(f"--model: generation runs on Claude through the Anthropic API; expected "
                         f"anthropic/claude-..., got {args.model!r}")
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise UsageError("ANTHROPIC_API_KEY is not set: export your Anthropic API key to generate questions")
    files = OutputFiles(args.out or Path("fixtures") / "questions" / f"FR-{args.date}.generated.jsonl")
    _check_output(files, "--out" if args.out else "output")
    cache_dir = _cache_dir(args)
    issue = open_issue(args.date, args.data_dir, cache_dir)
    targets = _select(issue, args.section, args.sections)
    examples = _examples(args, issue, cache_dir)
    done = files.done()
    todo = [s for s in targets if s.id not in done]
    print(f"FR {args.date}: {len(issue.sections)} kept sections, {len(targets)} selected, "
          f"{len(targets) - len(todo)} already written (skipped), {len(todo)} to generate with {spec.spec}")
    default = [e.section_id for e in pick_examples(examples, "")]
    print(f"few-shot examples from FR {EXAMPLE_DATE}: {', '.join(default)} "
          f"({examples[2].section_id} stands in when a section is one of them)")
    outcomes = asyncio.run(_run(spec, todo, args, cache_dir, examples, issue, files)) if todo else []
    files.sort({s.id: s.index for s in issue.sections})
    failed = [o for o in outcomes if o.error is not None]
    kept = sum(len(o.kept) for o in outcomes)
    print(f"this run: {len(outcomes) - len(failed)} sections, kept {kept}, rejected "
          f"{sum(o.count('rejected') for o in outcomes)}, unparseable {sum(o.count('unparseable') for o in outcomes)}, "
          f"failed {len(failed)} section(s)")
    written = load_questions(files.out) if files.out.is_file() else []
    print(f"{files.out}: {len(written)} questions in {len({q.section_id for q in written})} sections; "
          f"answer is the longest option in {longest_answer_share(written):.0%}; rejected items in {files.rejected}")
    if failed:
        print(f"{len(failed)} section(s) failed; run the same command again to retry them")
    return 1 if failed else 0


def _check_output(files: OutputFiles, what: str) -> None:
    """Before anything is generated: both output files can be written (their folder may be created)."""
    from pytest_longctx.util.fsutil import output_file_problem

    for path in (files.out, files.rejected):
        problem = output_file_problem(path, "questions.jsonl")
        if problem is not None:
            raise UsageError(f"{what}: {problem}")


async def _run(spec: ModelSpec, todo: list[Section], args: argparse.Namespace, cache_dir: Path,
               examples: list[Example], issue: Issue, files: OutputFiles) -> list[Outcome]:
    from pytest_longctx import ModelClient, ResponseCache, build_backend

    backend = build_backend(spec, context_window=spec.profile.context_window, max_concurrency=args.concurrency)
    cache = None if args.no_cache else ResponseCache(cache_dir)
    client = ModelClient(backend, cache, "off" if args.no_cache else "on", args.concurrency)

    def report(outcome: Outcome) -> None:
        print(outcome.summary(), flush=True)
        for record in outcome.rejected:
            print(f"    {record.get('id') or 'reply'} {record['stage']}: {record['reason']}")

    try:
        sections = {s.id: s.text for s in issue.sections}
        return await generate_all(client, todo, issue.date, examples, sections, files, report)
    finally:
        await backend.aclose()


def _stats(args: argparse.Namespace) -> int:
    issue = open_issue(args.date, args.data_dir, _cache_dir(args))
    tokens = sorted(s.tokens for s in issue.sections)
    median = statistics.median(tokens) if tokens else 0
    print(f"FR {issue.date}: {issue.source}")
    print(f"raw sections:   {issue.raw_sections}")
    print(f"kept sections:  {len(issue.sections)} ({MIN_TOKENS} < tokens <= {MAX_TOKENS:,})")
    print(f"total tokens:   {issue.total_tokens:,}")
    if tokens:
        print(f"section tokens: min {tokens[0]:,}, median {median:,g}, max {tokens[-1]:,}")
    print(f"tokenizer:      {issue.tokenizer}")
    if args.list:
        for s in issue.sections:
            print(f"  {s.id:<12} {s.tokens:>6,}  {_heading(s.text)[:90]}")
    return 0


def _heading(text: str) -> str:
    """"AGENCY / first line after it" of a section (its billing-code remainder skipped)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if " " in line and line.isupper()), 0)
    return " / ".join(lines[at: at + 2])


def _validate(args: argparse.Namespace) -> int:
    path: Path = args.path
    if not path.is_file():
        raise UsageError(f"{path}: no such question file; pass a JSONL question set such as "
                         f"fixtures/questions/FR-{EXAMPLE_DATE}.jsonl")
    date = args.date
    if date is None:
        found = _DATE_IN_NAME.search(path.name)
        if found is None:
            raise UsageError(f"--date: not given and {path.name} does not name one (FR-YYYY-MM-DD...); pass --date")
        date = _date(found.group(1))
    questions = load_questions(path)
    issue = open_issue(date, args.data_dir, _cache_dir(args))
    problems = validate(questions, {s.id: s.text for s in issue.sections})
    problems += [f"{q.id}: {p}" for q in questions for p in item_problems(q)]
    order = {q.id: i for i, q in enumerate(questions)}
    problems.sort(key=lambda p: order.get(p.partition(": ")[0], len(order)))
    for problem in problems:
        print(problem)
    print(_shape(questions))
    print(f"{path}: {len(questions)} questions, {len(problems)} problem(s); answer is the longest option in "
          f"{longest_answer_share(questions):.0%} of questions")
    return 1 if problems else 0


def _shape(questions: list[Question]) -> str:
    per = Counter(q.section_id for q in questions)
    numerical = Counter(q.section_id for q in questions if q.kind == "numerical")
    full = sum(1 for sid, n in per.items() if n == 5 and numerical[sid] == 1)
    return f"sections: {len(per)}, of which {full} have five questions with one numerical"


if __name__ == "__main__":
    sys.exit(main())
