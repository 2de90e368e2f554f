"""``longctx-gate``: decide from run records, without pytest or a model.

``longctx-gate CANDIDATE.json [--compare BASELINE.json] [--threshold EXPR ...] [--alpha A] [--report-dir DIR]``
re-decides a finished run: CI can apply other thresholds, a reviewer can check a verdict. It runs the plugin's own
decision (``results.decide.decide``: the comparison, ``results/gate.py``, the per-experiment summary; nothing of the
pytest layer) and prints the same block the run's terminal summary opens with (``reporting/decision.py``) and the
same gate lines; it exits with the run's code for that record (``results/decision.py``): 0 (pass or no threshold),
1 (a trial errored: as its run did), 10 (a threshold missed), 11 (the gate could not decide). A sequential run's
record keeps its alarms' sequential verdicts and says so. Bad input (a missing file, not a run record, a record that
contradicts itself or the compared one, a bad threshold, a refused baseline) is one line on stderr and exit 4.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import (
    DEFAULT_ALPHA,
    DEFAULT_EFFECTIVE_ACCURACY,
    GateSettings,
    parse_alpha,
    parse_threshold,
    unique,
)

USAGE_EXIT = 4
PROG = "longctx-gate"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit 4, as every bad input
        self.exit(USAGE_EXIT, f"{PROG}: {message} (see {PROG} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Decide from run records (longctx.json) as the run's gate would: the "
                     "same decision block, the same exit codes (0 pass, 10 fail, 11 gate error, 4 bad input).")
    parser.add_argument("candidate", help="the run record to decide on (a longctx.json)")
    parser.add_argument("--compare", metavar="BASELINE.json", help="the compared run's record (for max-drop)")
    parser.add_argument("--threshold", action="append", default=None, metavar="EXPR",
                        help="gate expression, repeatable (default: the thresholds the candidate ran with)")
    parser.add_argument("--alpha", default=None, help="the gate's false-alarm rate (default: the candidate's)")
    parser.add_argument("--compare-partial", action="store_true",
                        help="accept a partial baseline (stopped, another seed or protocol, lacking cells)")
    parser.add_argument("--report-dir", metavar="DIR", default=None,
                        help="also write the re-decided longctx.json and longctx.html here")
    return parser


def _settings(record: dict[str, Any], args: argparse.Namespace) -> GateSettings:
    """What the gate reads: the record's settings, this command's options over them."""
    ran = record.get("settings") or {}
    texts = args.threshold if args.threshold is not None else list(ran.get("thresholds") or [])
    thresholds = unique(parse_threshold(str(t), flag="--threshold") for t in texts)
    alpha = parse_alpha(str(args.alpha), flag="--alpha") if args.alpha is not None else float(
        ran.get("alpha", DEFAULT_ALPHA))
    return GateSettings(thresholds, alpha, Path(args.compare) if args.compare else None, args.compare_partial,
                        float(ran.get("effective_accuracy", DEFAULT_EFFECTIVE_ACCURACY)), int(ran.get("seed", 0)),
                        int(ran.get("samples", 0)), bool(ran.get("samples_all", False)),
                        str(ran.get("protocol", "longctx")))


def _prepare(args: argparse.Namespace) -> tuple[dict[str, Any], GateSettings, dict[str, Any] | None]:
    """Read and check both records and the options; UsageError (one line) on the first problem."""
    from pytest_longctx.results.baseline import baseline_problems, refusal
    from pytest_longctx.results.schema import load_record
    from pytest_longctx.results.thresholds import describe_cells, unmatched

    path = Path(args.candidate)
    record = load_record(path, flag=PROG)
    own = [p for p in baseline_problems(record, seed=None, protocol=None) if p.kind in ("plan", "stopped")]
    if own:
        raise UsageError(f"{PROG}: {path} {own[0].said}: its run decided nothing; pass a completed run's "
                         "longctx.json")
    settings = _settings(record, args)
    relative = [t.text for t in settings.thresholds if t.relative]
    if relative and settings.compare is None:
        raise UsageError(f"--threshold: {relative[0]!r} is relative to an earlier run; pass --compare BASELINE.json")
    missing = unmatched(settings.thresholds, record["cells"])
    if missing and record["cells"]:
        raise UsageError(f"--threshold: {missing[0].text!r} matches none of the record's cells "
                         f"({describe_cells(record['cells'])}); fix its selector")
    _check_sequential(record, settings, path)
    baseline = None
    if settings.compare is not None:
        baseline = load_record(settings.compare, flag="--compare")
        problems = baseline_problems(baseline, seed=settings.seed, protocol=settings.protocol, cells=record["cells"])
        refused = refusal(settings.compare, problems, partial_ok=settings.compare_partial, flag="--compare")
        if refused is not None:
            raise UsageError(refused.replace("--longctx-compare-partial", "--compare-partial"))
    return record, settings, baseline


def _check_sequential(record: dict[str, Any], settings: GateSettings, path: Path) -> None:
    """A sequential run's record is decided by its own alarms at its own alpha; a run that stopped early (or skipped
    trials once alarms settled) answered a sample no fixed test may decide: other thresholds are refused."""
    section = record.get("sequential")
    if not section:
        return
    ran = float((record.get("settings") or {}).get("alpha", settings.alpha))
    if settings.alpha != ran:
        raise UsageError(f"--alpha: {path} is a sequential "
                         f"run's record: its alarms were settled at alpha {ran:g}; drop --alpha")
    early = bool(section.get("stopped")) or not section.get("final_look", False) or any(
        a.get("skipped_trials") for a in section.get("alarms") or [])
    alarms = {str(a.get("threshold")) for a in section.get("alarms") or []}
    other = [t.text for t in settings.thresholds if t.text not in alarms]
    if early and other:
        raise UsageError(f"--threshold: {other[0]!r} is not one of the sequential run's alarms "
                         f"({', '.join(sorted(alarms)) or 'none'}), and that run stopped before the end of its design: "
                         "no fixed test may decide the trials it chose to answer; gate it with its own alarms, or "
                         "re-run without --longctx-sequential")


def main(argv: Sequence[str] | None = None) -> int:
    """The command; returns its exit code."""
    args = _parser().parse_args(argv)
    try:
        record, settings, baseline = _prepare(args)
    except UsageError as exc:
        print(str(exc).splitlines()[0], file=sys.stderr)
        return USAGE_EXIT
    from pytest_longctx.reporting.decision import gate_lines, terminal_lines
    from pytest_longctx.results.decide import decide
    from pytest_longctx.results.evidence import declared_in

    for cell in record["cells"]:
        cell.pop("compare", None)  # the run's comparison; this one's is attached afresh
    record["settings"].update(thresholds=[t.text for t in settings.thresholds], alpha=settings.alpha,
                              compare=str(settings.compare) if settings.compare else None,
                              compare_partial=settings.compare_partial)
    record["decided_by"] = {"command": PROG, "candidate": args.candidate}
    notes: list[str] = []
    sequential = record.get("sequential")
    if sequential:
        notes.append(f"{args.candidate} is a sequential run's record: its alarms keep the verdicts its e-processes "
                     "(or final look) reached, not re-decided by the fixed test on the trials it answered")
    result = decide(record, settings, declared_in(record), baseline, notes, sequential=sequential or None)
    if result.refused:  # the two records contradict each other: nothing decided
        print(f"--compare: {result.refused}", file=sys.stderr)
        return USAGE_EXIT
    for _, line in terminal_lines(record) + gate_lines(record):
        print(line)
    for note in notes:
        print(f"longctx: {note}")
    if args.report_dir is not None:
        from pytest_longctx.reporting.writer import write_reports

        try:
            for written in write_reports(record, Path(args.report_dir)):
                print(f"longctx report: {written}")
        except OSError as exc:
            print(f"--report-dir: {args.report_dir}: cannot write ({exc.strerror or exc}); pass a writable folder",
                  file=sys.stderr)
            return USAGE_EXIT
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
