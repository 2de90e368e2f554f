"""The block that opens the terminal summary and the HTML report: per experiment, what the run shows and what the
gate decided, in words.

Per experiment: pooled accuracy with its interval and the number of independent items behind it; the effective
context length with its interval; against a compared run, the paired difference with its interval, how many
trials paired, and what the run could have detected; then each threshold's verdict naming the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.reporting.charts import esc, p_number
from pytest_longctx.util.words import plural


@dataclass
class Block:
    """One experiment's lines (or the gate's own, for thresholds spanning experiments)."""

    name: str
    facts: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)  # (verdict, words)


def _accuracy(entry: Mapping[str, Any]) -> str:
    p = entry["pooled"]
    unit = entry.get("unit", "trial")
    errors = f", {entry['errors']} errors" if entry.get("errors") else ""
    units = ("each its own unit of evidence" if unit == "trial"
             else f"{p['clusters']:,} {plural(unit, p['clusters'])}")
    return f"accuracy {p['accuracy']:.3f} [{p['low']:.3f}, {p['high']:.3f}] over {p['n']:,} trials, {units}{errors}"


def _length_text(found: Mapping[str, Any]) -> str:
    if found.get("below_shortest"):
        shortest = found["levels"][0]["tokens"] if found.get("levels") else 0
        return f"below the shortest tested ({shortest:,} tokens)"
    text = f"{found['tokens']:,} tokens [{found['low']:,}, {found['high']:,}]"
    return text + (" (every tested length passed: at least this)" if found.get("at_least") else "")


def _length(found: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> str | None:
    if not found:
        return None
    text = f"effective length {_length_text(found)} at accuracy >= {found['threshold']}"
    return text + (f"; compared run: {_length_text(before)}" if before else "")


def p_text(p: float) -> str:
    """A p-value as people read it: three significant digits, and no '0' for one too small to print."""
    number = p_number(p)
    return f"p{number}" if number.startswith("<") else f"p={number}"


def _versus(vs: Mapping[str, Any] | None, detectable: Mapping[str, Any] | None) -> list[str]:
    out = []
    if vs:
        out.append(f"vs compared run: {vs['diff']:+.3f} [{vs['low']:+.3f}, {vs['high']:+.3f}] over {vs['pairs']:,} "
                   f"paired trials ({vs['regressed']} right->wrong, {vs['improved']} wrong->right), "
                   f"{p_text(vs['p_value'])}")
    if detectable:
        drop = detectable.get("drop")
        said = (f"could detect a drop of {drop:.3f} with power {detectable['power']} ({detectable['alpha_text']}, "
                f"one-sided)" if drop is not None else
                f"too small to detect any drop with power {detectable['power']} ({detectable['alpha_text']})")
        out.append(f"{said}; assuming {detectable['assumptions']['source']}")
    return out


def blocks(record: Mapping[str, Any]) -> list[Block]:
    """The blocks of ``record``, one per experiment, then one for thresholds spanning experiments."""
    experiments = record.get("experiments") or {}
    lengths = record.get("effective_length") or {}
    comparison = record.get("comparison") or {}
    before = comparison.get("effective_length") or {}
    checks = (record.get("gate") or {}).get("checks") or []
    out = []
    for name, entry in experiments.items():
        block = Block(name, [_accuracy(entry)])
        if (length := _length(lengths.get(name), before.get(name))) is not None:
            block.facts.append(length)
        block.facts.extend(_versus(entry.get("vs"), entry.get("detectable")))
        block.verdicts = [(c["verdict"], f"{c['threshold']}: {c.get('words', '')}") for c in checks
                          if c.get("experiments") == [name]]
        out.append(block)
    spanning = [(c["verdict"], f"{c['threshold']}: {c.get('words', '')}") for c in checks
                if len(c.get("experiments") or []) != 1]
    if spanning:
        out.append(Block("gate", [], spanning))
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
    return text


def terminal_lines(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(style, text) lines: style is "", "bold", "red" or "green"."""
    lines: list[tuple[str, str]] = []
    for block in blocks(record):
        lines.append(("bold", block.name))
        lines.extend(("", f"  {fact}") for fact in block.facts)
        for verdict, words in block.verdicts:
            style = "red" if verdict in ("fail", "error", "too-few") else "green"
            lines.append((style, f"  {verdict.upper()}  {words}"))
    if (pairing := pairing_line(record)) is not None:
        lines.append(("", pairing))
    return lines


def decision_html(record: Mapping[str, Any]) -> str:
    """The report's opening block: one card per experiment, verdicts in words."""
    cards = []
    for block in blocks(record):
        facts = "".join(f"<li>{esc(f)}</li>" for f in block.facts)
        verdicts = "".join(f'<li class="{esc(v)}"><span class="badge {esc(v)}">{esc(v)}</span> {esc(w)}</li>'
                           for v, w in block.verdicts)
        cards.append(f'<div class="decision"><h3>{esc(block.name)}</h3><ul class="said">{facts}</ul>'
                     + (f'<ul class="verdicts">{verdicts}</ul>' if verdicts else "") + "</div>")
    if not cards:
        return ""
    pairing = pairing_line(record)
    note = f'<p class="muted">{esc(pairing)}</p>' if pairing else ""
    return f'<section id="decision"><h2>What this run shows</h2>{"".join(cards)}{note}</section>'


def power_lines(power: Mapping[str, Any]) -> list[str]:
    """A plan's power statements: what each experiment (and each drop threshold) would detect, and what a drop
    asked with --longctx-detect would need."""
    lines = [f"power: the smallest uniform drop detected with power {power['power']} at one-sided "
             f"{power['alpha_text']} (the gate's worst case: Holm's first step)"]

    def said(name: str, entry: Mapping[str, Any]) -> str:
        drop = entry["drop"]
        per_item = f" ({entry['trials'] / entry['clusters']:.1f} trials an item)" if entry["clusters"] else ""
        text = (f"{name}: {entry['trials']:,} trials, {entry['clusters']:,} independent items{per_item}: "
                + (f"a drop of {drop:.3f}" if drop is not None else "no drop (too few independent items)"))
        found = entry.get("detect")
        if found:
            if found["samples"] is None:
                text += f"; a drop of {found['drop']} is out of reach"
            else:
                cost = f" (~${found['cost_usd']:,.2f} at list prices, uncached)" if "cost_usd" in found else ""
                text += (f"; a drop of {found['drop']} needs --longctx-samples {found['samples']:,} "
                         f"(now {entry['samples']:,}){cost}, if it has that many distinct items")
        return text

    for name, entry in power["experiments"].items():
        lines.append("  " + said(name, entry) + f" [assuming {entry['assumptions']['source']}]")
    for entry in power["thresholds"]:
        lines.append("  " + said(f"threshold {entry['threshold']}", entry))
    return lines
