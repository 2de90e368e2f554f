"""The block that opens the terminal summary and the HTML report: what the run shows and what decided its exit code.

First the run's status: errors, a stop, the gate's verdict and the exit code, with counts. Then a row per
experiment (per experiment and model when a report holds several): pooled accuracy with its interval and the
independent items behind it; against a compared run, the paired difference with its interval; the effective
context length with its interval; what the design could detect; each threshold's verdict. Failing rows first.
The terminal (:func:`terminal_lines`) and the HTML report (``decision_table.py``) read the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.reporting.charts import p_number
from pytest_longctx.util.words import plural

#: Verdicts that make a row (and the run) fail.
BAD = ("fail", "error", "too-few")


@dataclass
class Status:
    """The run as a whole: what decides its exit code, with counts."""

    trials: int
    errors: int
    stopped: str | None
    gate: str  # pass, fail, error, none
    counts: dict[str, int]
    exit_code: int
    gate_errors: list[str] = field(default_factory=list)
    gate_code: int = 0

    @property
    def scored(self) -> int:
        return self.trials - self.errors

    @property
    def kind(self) -> str:
        """The worst thing about the run: stopped, errors, fail, error, pass or none."""
        if self.stopped:
            return "stopped"
        if self.gate in ("fail", "error"):
            return self.gate
        return "errors" if self.errors else self.gate

    def headline(self) -> str:
        """The verdict in a few words: ``FAIL``, ``200 ERRORS`` (whatever a passing gate said), ``STOPPED``,
        ``PASS``, ``NO GATE``."""
        if self.kind == "stopped":
            return "STOPPED"
        if self.kind == "errors":  # a gate that passed is no PASS while trials errored: the run exits 1
            return f"{self.errors:,} {plural('error', self.errors).upper()}"
        return {"none": "NO GATE"}.get(self.gate, self.gate.upper())

    def facts(self, reasons: bool = True) -> list[str]:
        """The counts behind the headline, exit code last: ``200 errors of 200 trials``, ``exit code 1``.
        ``reasons``: say why the run stopped and why the gate could not check (the terminal prints them once,
        further down)."""
        out = []
        if self.stopped:
            out.append(f"run stopped: {self.stopped}" if reasons else "stopped (why: below)")
        if self.errors:
            scored = "nothing scored" if not self.scored else f"{self.scored:,} scored"
            out.append(f"{self.errors:,} {plural('error', self.errors)} of {self.trials:,} trials ({scored}; errors "
                       "are not counted as wrong answers)")
        else:
            out.append(f"{self.trials:,} trials, no errors")
        if self.gate == "none":
            out.append("no thresholds set")
        elif self.gate == "error":
            out.append("gate could not check" + (": " + "; ".join(self.gate_errors) if reasons else " (why: below)"))
        else:
            checked = sum(self.counts.values())
            out.append(", ".join(f"{v} {k}" for k, v in self.counts.items() if v) + f" of {checked} "
                       f"{plural('threshold check', checked)}")
        why = "stopped" if self.stopped else "errors" if self.errors else ""
        alone = f"; the gate alone: exit code {self.gate_code}" if why and self.gate in ("fail", "error") else ""
        out.append(f"exit code {self.exit_code}" + (f" ({why}{alone})" if why else ""))
        return out


def run_status(record: Mapping[str, Any]) -> Status:
    """Errors, stop, gate and exit code of ``record``. The exit code is the record's own when it has one, else what
    the run gave: 2 when stopped, 1 when a trial errored, the gate's code when it failed, 0 otherwise."""
    trials = record.get("trials")
    if trials and not record.get("models"):  # several models: the record's trials are the reference's only
        total, errors = len(trials), sum(1 for t in trials if t.get("outcome") == "error")
    else:
        cells = record.get("cells") or []
        total = int((record.get("usage") or {}).get("trials", sum(int(c.get("n", 0)) + int(c.get("errors", 0))
                                                                    for c in cells)))
        errors = sum(int(c.get("errors", 0)) for c in cells)
        if record.get("models"):  # every model's errors, as its trials are all counted in the usage
            errors = sum(int(row.get("errors", 0)) for e in (record["models"].get("experiments") or {}).values()
                         for row in (e.get("models") or {}).values())
    gate = record.get("gate") or {}
    status = str(gate.get("status", "none"))
    code = record.get("exit_code")
    if not isinstance(code, int):  # the one decision's (results/decision.py)
        from pytest_longctx.results.decision import record_exit_code

        code = record_exit_code(record)
    counts = {str(k): int(v) for k, v in (gate.get("counts") or {}).items()}
    reasons = [str(e) for e in gate.get("errors") or []]
    return Status(total, errors, record.get("stopped"), status, counts, code, reasons, int(gate.get("exit_code") or 0))


@dataclass
class Row:
    """One experiment (of one model, when a report holds several): what it shows and how its thresholds judged it."""

    experiment: str
    series: str = ""
    pooled: Mapping[str, Any] | None = None
    unit: str = "trial"
    errors: int = 0
    vs: Mapping[str, Any] | None = None
    length: Mapping[str, Any] | None = None
    length_before: Mapping[str, Any] | None = None
    detectable: Mapping[str, Any] | None = None
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # (verdict, threshold, words)
    length_diff: Mapping[str, Any] | None = None  # the paired difference of the two runs' effective lengths

    @property
    def kind(self) -> str:
        """``fail`` (a threshold failed, or nothing scored for errors), ``warn`` (some errors) or ``ok``."""
        if any(v in BAD for v, _, _ in self.verdicts) or (self.errors and not (self.pooled or {}).get("n")):
            return "fail"
        return "warn" if self.errors else "ok"

    @property
    def name(self) -> str:
        return f"{self.experiment} · {self.series}" if self.series else self.experiment


def ordered(rows: Sequence[Row]) -> list[Row]:
    """Failing rows first, then rows with errors, then the rest; the record's order within each."""
    rank = {"fail": 0, "warn": 1, "ok": 2}
    return sorted(rows, key=lambda r: rank[r.kind])


def _verdicts(checks: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    return [(str(c["verdict"]), str(c["threshold"]), str(c.get("words", ""))) for c in checks]


def rows(record: Mapping[str, Any], series: str = "") -> list[Row]:
    """``record``'s rows, one per experiment, then one for thresholds spanning experiments (not ordered)."""
    experiments = record.get("experiments") or {}
    lengths = record.get("effective_length") or {}
    comparison = record.get("comparison") or {}
    before = comparison.get("effective_length") or {}
    length_diffs = comparison.get("effective_length_diff") or {}
    checks = (record.get("gate") or {}).get("checks") or []
    out = [Row(name, series, entry.get("pooled"), entry.get("unit", "trial"), int(entry.get("errors") or 0),
               entry.get("vs"), lengths.get(name), before.get(name), entry.get("detectable"),
               _verdicts([c for c in checks if c.get("experiments") == [name]]), length_diffs.get(name))
           for name, entry in experiments.items()]
    # an experiment the summary lacks (it could not be computed) keeps its row: its verdicts and errors stay shown
    named = [str(c["experiment"]) for c in record.get("cells") or [] if "experiment" in c]
    named += [str(e) for c in checks for e in c.get("experiments") or [] if len(c.get("experiments") or []) == 1]
    for name in dict.fromkeys(n for n in named if n not in experiments):
        errors = sum(int(c.get("errors", 0)) for c in record.get("cells") or [] if c.get("experiment") == name)
        out.append(Row(name, series, errors=errors, verdicts=_verdicts(
            [c for c in checks if c.get("experiments") == [name]]), length=lengths.get(name)))
    spanning = [c for c in checks if len(c.get("experiments") or []) != 1]
    if spanning:
        out.append(Row("all experiments", series, verdicts=_verdicts(spanning)))
    return out


def model_rows(record: Mapping[str, Any]) -> list[Row]:
    """Several models in one run: a row per experiment and model from the run's side-by-side summary (pooled
    accuracy, the paired difference from the reference, effective length), with that model's own checks; the
    design's detectable drop is the experiment's (every model ran the same items)."""
    models = record.get("models") or {}
    experiments = record.get("experiments") or {}
    checks = (record.get("gate") or {}).get("checks") or []
    out = []
    for name, summary in (models.get("experiments") or {}).items():
        run = experiments.get(name) or {}
        for spec, entry in (summary.get("models") or {}).items():
            mine = [c for c in checks if c.get("model", models.get("reference")) == spec
                    and c.get("experiments") == [name]]
            out.append(Row(name, str(spec), entry.get("pooled"), run.get("unit", "trial"),
                           int(entry.get("errors") or 0), entry.get("vs_reference"), entry.get("effective_length"),
                           None, run.get("detectable"), _verdicts(mine)))
    spanning = [c for c in checks if len(c.get("experiments") or []) != 1]
    for spec in dict.fromkeys(str(c.get("model", models.get("reference"))) for c in spanning):
        out.append(Row("all experiments", spec, verdicts=_verdicts(
            [c for c in spanning if str(c.get("model", models.get("reference"))) == spec])))
    return out


def accuracy_text(row: Row) -> str | None:
    p = row.pooled
    if not p or not p.get("n"):
        return None
    units = ("each its own unit of evidence" if row.unit == "trial"
             else f"{p['clusters']:,} {plural(row.unit, p['clusters'])}")
    return f"accuracy {p['accuracy']:.3f} [{p['low']:.3f}, {p['high']:.3f}] over {p['n']:,} trials, {units}"


def length_text(found: Mapping[str, Any]) -> str:
    if found.get("below_shortest"):
        shortest = found["levels"][0]["tokens"] if found.get("levels") else 0
        return f"below the shortest tested ({shortest:,} tokens)"
    text = f"{found['tokens']:,} tokens [{found['low']:,}, {found['high']:,}]"
    return text + (" (every tested length passed: at least this)" if found.get("at_least") else "")


def _length_words(found: Mapping[str, Any], before: Mapping[str, Any] | None) -> str:
    text = f"effective length {length_text(found)} at accuracy >= {found['threshold']}"
    if relative := found.get("relative"):
        text += (f"; relative (>= {relative['share']:.0%} of its shortest length's accuracy, "
                 f"{relative['threshold']:.3f}): {length_text({**relative, 'levels': found.get('levels')})}")
    return text + (f"; compared run: {length_text(before)}" if before else "")


def _length_diff(diff: Mapping[str, Any]) -> str:
    return (f"effective length vs compared run: {diff['diff']:+,} tokens [{diff['low']:+,}, {diff['high']:+,}] "
            f"({diff['now']:,} vs {diff['before']:,}) over {diff['clusters']:,} shared items, paired bootstrap")


def p_text(p: float) -> str:
    """A p-value as people read it: three significant digits, and no '0' for one too small to print."""
    number = p_number(p)
    return f"p{number}" if number.startswith("<") else f"p={number}"


def vs_text(vs: Mapping[str, Any]) -> str:
    return (f"vs compared run: {vs['diff']:+.3f} [{vs['low']:+.3f}, {vs['high']:+.3f}] over {vs['pairs']:,} "
            f"paired trials ({vs['regressed']} right->wrong, {vs['improved']} wrong->right), {p_text(vs['p_value'])}")


def detectable_words(entry: Mapping[str, Any]) -> str:
    """What a design detects with 80% power, from the design and the baseline alone: a diffuse drop, and the
    items that must break (concentrated)."""
    drop, broken = entry.get("drop"), entry.get("concentrated")
    level = f"power {entry['power']}, {entry['alpha_text']}, one-sided" if "power" in entry else ""
    diffuse = f"a diffuse drop of {drop:.3f}" if drop is not None else "no diffuse drop"
    items = (f"{broken['items']} of {entry.get('clusters', '?')} items breaking (a drop of {broken['drop']:.3f})"
             if broken else "no share of items breaking")
    return f"the design detects {diffuse}, or {items}" + (f" ({level})" if level else "")


def detect_text(detectable: Mapping[str, Any]) -> str:
    return f"{detectable_words(detectable)}; assuming {detectable['assumptions']['source']}"


def facts(row: Row) -> list[str]:
    """A row in words, as the terminal prints it."""
    out = []
    if (acc := accuracy_text(row)) is not None:
        out.append(acc + (f", {row.errors} errors" if row.errors else ""))
    elif row.errors:
        out.append(f"{row.errors} errors, nothing scored")
    if row.length:
        out.append(_length_words(row.length, row.length_before))
    if row.length_diff:
        out.append(_length_diff(row.length_diff))
    if row.vs:
        out.append(vs_text(row.vs))
    if row.detectable:
        out.append(detect_text(row.detectable))
    return out


def pairing_line(record: Mapping[str, Any]) -> str | None:
    """How the compared run's trials paired with this run's, and why some did not."""
    comparison = record.get("comparison") or {}
    pairing = comparison.get("pairing")
    if not pairing:
        return None
    here = sum(pairing["unpaired_here"].values())
    there = sum(pairing["unpaired_there"].values())
    why = "; ".join(f"{n:,} {r}" for r, n in {**pairing["unpaired_here"]}.items())
    why_there = "; ".join(f"{n:,} {r}" for r, n in pairing["unpaired_there"].items())
    seed = "same seed" if comparison.get("same_seed") else f"another seed ({comparison.get('baseline_seed')})"
    text = (f"compared with {comparison.get('baseline_model')} ({seed}): {pairing['paired']:,} trials paired on "
            f"{pairing['by']}s, {here:,} of this run unpaired" + (f" ({why})" if why else "")
            + f", {there:,} of the compared run unpaired" + (f" ({why_there})" if why_there else ""))
    if comparison.get("legacy_note"):
        text += f"; {comparison['legacy_note']}"
    if comparison.get("partial"):
        text += f"; {comparison['partial']} (accepted with --longctx-compare-partial)"
    return text


def status_line(status: Status) -> tuple[str, str]:
    """(style, text): the run's verdict and its counts on one line, red when the exit code is not 0."""
    style = "red" if status.exit_code else "green" if status.gate == "pass" else ""
    return style, f"{status.headline()}: " + "; ".join(status.facts(reasons=False))


def terminal_lines(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(style, text) lines: style is "", "bold", "red" or "green". The run's status first, then failing
    experiments first."""
    lines: list[tuple[str, str]] = [status_line(run_status(record))]
    for row in ordered(rows(record)):
        lines.append(("red" if row.kind == "fail" else "bold", row.name))
        lines.extend(("", f"  {fact}") for fact in facts(row))
        for verdict, threshold, words in sorted(row.verdicts, key=lambda v: v[0] not in BAD):
            style = "red" if verdict in BAD else "green"
            lines.append((style, f"  {verdict.upper()}  {threshold}: {words}"))
    if (pairing := pairing_line(record)) is not None:
        lines.append(("", pairing))
    return lines


def gate_lines(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(style, text) lines of the gate's status and errors: the run's summary and ``longctx-gate`` print them."""
    gate = record.get("gate") or {}
    if gate.get("status", "none") == "none":
        return []
    counts = ", ".join(f"{v} {k}" for k, v in gate["counts"].items() if v) or "no cell checked"
    bad = gate["status"] in ("fail", "error")
    lines = [("red" if bad else "green" if gate["status"] == "pass" else "",
              f"gate: {gate['status'].upper()} ({counts})" + (f" -> exit code {gate['exit_code']}" if bad else ""))]
    lines.extend(("red", f"gate error: {reason}") for reason in gate.get("errors") or [])
    return lines


def power_lines(power: Mapping[str, Any]) -> list[str]:
    """A plan's power statements: what each experiment (and each drop threshold) would detect, and what a drop
    asked with --longctx-detect would need."""
    lines = [f"power: the smallest drop detected with power {power['power']} at one-sided "
             f"{power['alpha_text']} (the gate's worst case: Holm's first step), diffuse (every answer a little "
             f"likelier wrong) and concentrated (items wrong in every cell they are asked in)"]
    if power.get("other_family"):
        lines.append(f"  the candidate {power['candidate']} is of another family than the compared run's "
                     f"{power['compared_model']}: each figure is given for both worlds")

    def seen(entry: Mapping[str, Any]) -> str:
        drop, broken = entry["drop"], entry.get("concentrated")
        text = ((f"a drop of {drop:.3f}" if drop is not None else "no drop (too few independent items)")
                + (f" diffuse, or {broken['items']} items breaking (a drop of {broken['drop']:.3f})" if broken
                   else ""))
        found = entry.get("detect")
        if found:
            if found["samples"] is None:
                text += f"; a drop of {found['drop']} is out of reach"
            else:
                cost = f" (~${found['cost_usd']:,.2f} at list prices, uncached)" if "cost_usd" in found else ""
                text += (f"; a diffuse drop of {found['drop']} needs --longctx-samples {found['samples']:,} "
                         f"(now {entry['samples']:,}){cost}, if it has that many distinct items")
        return text

    def said(name: str, entry: Mapping[str, Any]) -> str:
        per_item = f" ({entry['trials'] / entry['clusters']:.1f} trials an item)" if entry["clusters"] else ""
        head = f"{name}: {entry['trials']:,} trials, {entry['clusters']:,} independent items{per_item}: "
        far = entry.get("unrelated")
        if far is None:  # one world: say which
            return head + seen(entry) + (f" ({entry['world']})" if entry.get("world") else "")
        return (head + f"if {entry.get('world', 'versions of one model')}: {seen(entry)}; if unrelated models "
                f"(answers independent given item difficulty, {far['assumptions']['discordance']:.3f} discordant): "
                + seen(far))

    for name, entry in power["experiments"].items():
        lines.append("  " + said(name, entry) + f" [assuming {entry['assumptions']['source']}]")
    for entry in power["thresholds"]:
        lines.append("  " + said(f"threshold {entry['threshold']}", entry))
    return lines
