"""The needle experiment's tables (NoLiMa's layout, the paired literal - non-literal difference by length, Context
Rot's distractor misses, abstention), its figures and summary lines. Intervals count pairs (clusters), not trials."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx import (
    Figure,
    LengthAxis,
    accuracy_lines,
    cell_bars,
    effective_length,
    paired_accuracy_difference,
    pooled_accuracy,
)

Rows = Sequence[Mapping[str, Any]]
SHARE = 0.85
SEED = 0


def _scored(trials: Rows) -> list[Mapping[str, Any]]:
    return [t for t in trials if t.get("outcome") in ("correct", "incorrect")]


def _study(rows: Rows, study: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if (r.get("params") or {}).get("study") == study]


def _cluster(t: Mapping[str, Any]) -> str:
    return str(t.get("cluster") or t.get("item"))


def _rate(trials: Rows, right: str = "correct") -> str:
    """``p [low, high] (n=..., pairs=...)`` with the clustered 95% interval."""
    if not trials:
        return "-"
    p = pooled_accuracy([(t.get("outcome") == "correct") == (right == "correct") for t in trials],
                        [_cluster(t) for t in trials])
    return f"{p.accuracy:.3f} [{p.low:.3f}, {p.high:.3f}] (n={p.n}, pairs={p.clusters})"


def _k(n: int) -> str:
    return f"{n / 1000:g}K" if n >= 1000 else str(n)


def nolima_table(trials: Rows) -> dict[str, Any] | None:
    """NoLiMa's Table: per variant, the base score (shortest length), its 85% bar, accuracy per length, and the
    relative effective length with its cluster-bootstrap 95% interval."""
    scored = _scored(_study(trials, "length"))
    lengths = sorted({int(t["params"]["tokens"]) for t in scored})
    if not lengths:
        return None
    rows = []
    for variant in ("nonliteral", "literal"):
        mine = [{**t, "cluster": _cluster(t)} for t in scored if t["params"].get("variant") == variant]
        if not mine:
            continue
        found = effective_length(mine, LengthAxis("tokens", tokens="context_tokens"), SHARE, SEED, share=SHARE)
        rel = found.relative if found is not None else None
        base = found.levels[0].accuracy if found is not None else 0.0
        length = (f"{rel.tokens:,} [{rel.interval()[0]:,}, {rel.interval()[1]:,}]"
                  + (" (every length kept)" if rel.at_least else "")) if rel is not None else "-"
        cells = [{"correct": sum(t["outcome"] == "correct" for t in mine if t["params"]["tokens"] == n),
                  "n": sum(1 for t in mine if t["params"]["tokens"] == n)} for n in lengths]
        rows.append([variant, length, f"{base:.3f} ({SHARE * base:.3f})", *cells])
    return {"experiment": "needle", "title": "Needle accuracy by context length (NoLiMa's layout)",
            "columns": ["variant", "effective length [95%]", "base score (x0.85)", *map(_k, lengths)], "rows": rows,
            "note": "Effective length: the longest tested length (measured prompt tokens) up to which every length "
                    "keeps 85% of the variant's own shortest-length accuracy (NoLiMa's relative bar); interval: "
                    "cluster bootstrap over pairs. Accuracy pools the depths."}


def paired_table(trials: Rows) -> dict[str, Any] | None:
    """Literal minus non-literal accuracy per length, paired on (pair, depth), clustered by pair."""
    scored = _scored(_study(trials, "length"))
    by: dict[tuple[int, str, Any, int], dict[str, bool]] = defaultdict(dict)
    for t in scored:
        p = t["params"]
        by[int(p["tokens"]), _cluster(t), p.get("depth"), int(t.get("sample", 0))][str(p["variant"])] = \
            t["outcome"] == "correct"
    rows = []
    for length in sorted({k[0] for k in by}):
        pairs = [(v["literal"], v["nonliteral"], k[1]) for k, v in sorted(by.items(), key=lambda kv: str(kv[0]))
                 if k[0] == length and len(v) == 2]
        if not pairs:
            continue
        d = paired_accuracy_difference([a for a, _, _ in pairs], [b for _, b, _ in pairs], [c for _, _, c in pairs])
        rows.append([_k(length), f"{sum(a for a, _, _ in pairs) / len(pairs):.3f}",
                     f"{sum(b for _, b, _ in pairs) / len(pairs):.3f}",
                     f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]", str(d.pairs), str(d.clusters)])
    if not rows:
        return None
    return {"experiment": "needle", "title": "Literal - non-literal accuracy by length (paired)",
            "columns": ["length", "literal", "non-literal", "difference [95%]", "paired trials", "pairs"],
            "rows": rows, "note": "Each literal trial paired with the non-literal trial of the same pair, length and "
                                  "depth (same haystack, place and name); interval clustered by pair."}


def distractor_table(trials: Rows) -> dict[str, Any] | None:
    """Per haystack and distractor count: accuracy, and what the misses answered (which distractor, by index)."""
    scored = _scored(_study(trials, "distractors"))
    if not scored:
        return None
    rows = []
    for haystack in ("coherent", "shuffled"):
        for count in (0, 1, 4):
            mine = [t for t in scored if t["params"].get("haystack") == haystack
                    and int(t["params"].get("distractors", -1)) == count]
            if not mine:
                continue
            misses = [t.get("detail") or {} for t in mine if t["outcome"] == "incorrect"]
            which: defaultdict[int, int] = defaultdict(int)
            for d in misses:
                if d.get("answer_kind") == "distractor":
                    which[int(d.get("answered_distractor", -1))] += 1
            kinds: defaultdict[str, int] = defaultdict(int)
            for d in misses:
                kinds[str(d.get("answer_kind"))] += 1
            rows.append([haystack, str(count), _rate(mine), str(len(misses)), str(kinds["distractor"]),
                         " ".join(f"d{i}:{n}" for i, n in sorted(which.items())) or "-",
                         str(kinds["other-name"]), str(kinds["abstained"]), str(kinds["no-name"])])
    return {"experiment": "needle", "title": "Needle misses with distractors, coherent vs shuffled haystack",
            "columns": ["haystack", "distractors", "accuracy [95%]", "wrong", "named a distractor", "which (d<i>)",
                        "another name", "abstained", "no name"], "rows": rows,
            "note": "d<i>: the category's i-th distractor (fixtures/needle/categories.json) was the name answered."}


def abstention_table(trials: Rows) -> dict[str, Any] | None:
    """Per length: accuracy on answerable items, hallucination rate where the needle was removed (a name given
    instead of the abstention phrase), and false abstentions, each with its clustered interval."""
    scored = _scored(_study(trials, "abstention"))
    if not scored:
        return None
    rows = []
    for length in sorted({int(t["params"]["tokens"]) for t in scored}):
        yes = [t for t in scored if t["params"]["tokens"] == length and t["params"].get("answerable") == "yes"]
        no = [t for t in scored if t["params"]["tokens"] == length and t["params"].get("answerable") == "no"]
        abstained = [{**t, "outcome": "correct" if (t.get("detail") or {}).get("answer_kind") == "abstained"
                      else "incorrect"} for t in yes]
        rows.append([_k(length), _rate(yes), _rate(no, right="incorrect"), _rate(abstained)])
    return {"experiment": "needle", "title": "Needle abstention: hallucination rate beside accuracy",
            "columns": ["length", "accuracy, answerable [95%]", "hallucination rate, needle removed [95%]",
                        "abstained on answerable [95%]"], "rows": rows,
            "note": "Gate it: 'experiment=needle,answerable=no:max-drop=0' (abstentions, paired with the compared "
                    "run) and 'experiment=needle,answerable=yes:max-drop=0.05'."}


def overlap_summary_table() -> dict[str, Any]:
    """Question-needle lexical overlap of the shipped pairs, per variant (per pair: the ``overlap`` command)."""
    from pytest_longctx.experiments.needle.overlap import overlaps, summary
    from pytest_longctx.experiments.needle.pairs import load_data

    found = summary(overlaps(load_data().pairs))
    return {"experiment": "needle", "title": "Needle-question lexical overlap (fixtures/needle)",
            "columns": ["variant", "pairs", "mean shared content words", "pairs sharing none", "mean BM25",
                        "max BM25"],
            "rows": [[v, f"{s['pairs']:.0f}", f"{s['mean_shared']:.2f}", f"{s['share_none']:.0%}",
                      f"{s['mean_bm25']:.2f}", f"{s['max_bm25']:.2f}"] for v, s in found.items()],
            "note": "Per pair: python -m pytest_longctx.experiments.needle overlap."}


def needle_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    return [t for t in (overlap_summary_table(), nolima_table(trials), paired_table(trials), distractor_table(trials),
                        abstention_table(trials)) if t is not None]


def needle_figures(cells: Rows) -> list[Figure | None]:
    return [accuracy_lines(_study(cells, "length"), "tokens", ["variant"], "Accuracy by context length, literal vs "
                           "non-literal"),
            cell_bars(_study(cells, "distractors"), "Accuracy with 0, 1, 4 distractors, coherent vs shuffled"),
            cell_bars(_study(cells, "abstention"), "Abstention: answerable=no counts an abstention as correct")]


def pairs_line(record: Mapping[str, Any]) -> list[str]:
    """How many pairs a 5-point drop of either shape needs at the planned trials per pair (a plan only; what the
    planned design itself detects is the plan's own power line)."""
    from pytest_longctx import items_power

    power = (record.get("plan") or {}).get("power") or {}
    planned = (power.get("experiments") or {}).get("needle")
    if not planned or int(planned.get("clusters") or 0) < 2:
        return []
    items, trials = int(planned["clusters"]), int(planned["trials"])
    found = items_power(items, max(round(trials / items), 1), float(power["alpha"]), planned.get("assumptions"))
    need = found["items_needed"]
    if need is None:
        return [f"needle pairs: no number of pairs detects a 5-point drop of either shape at {found['per_item']} "
                "trials a pair"]
    more = "" if need <= items else f": write {need - items} more (fixtures/needle/SOURCE.md)"
    world = f" ({planned['world']})" if planned.get("world") else ""
    far = planned.get("unrelated")
    if far:  # a candidate of another family: the unrelated models' figure too
        other = items_power(items, found["per_item"], float(power["alpha"]), far["assumptions"])["items_needed"]
        world = (f" if {planned.get('world', 'versions of one model')}; about "
                 f"{other if other is not None else 'no number of'} pairs if unrelated models")
    return [f"needle pairs: a 5-point drop of either shape needs about {need} pairs{world} asked equally often "
            f"(about {found['per_item']} times each) at one-sided alpha {found['alpha']:.4g}; fixtures/needle has "
            f"{items}{more}"]


def summary_lines(record: Mapping[str, Any]) -> list[str]:
    """The pairs' power (a plan); the hallucination rate beside answerable accuracy (the abstention study)."""
    trials = _scored(_study([t for t in record.get("trials") or [] if t.get("experiment") == "needle"],
                            "abstention"))
    if not trials:
        return pairs_line(record)
    yes = [t for t in trials if t["params"].get("answerable") == "yes"]
    no = [t for t in trials if t["params"].get("answerable") == "no"]
    return [f"needle abstention: hallucination rate {_rate(no, right='incorrect')}; answerable accuracy {_rate(yes)}"]
