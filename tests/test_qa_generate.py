"""``longctx-qa generate`` against the local Messages API server, with recorded replies
for real sections of the shared 2024-02-12 issue (clean, malformed, unparseable) and a synthetic issue
of another date; plus the parser, the quote matcher, the example excerpts and the review on plain values.

The recorded replies are kept as a model writes them: one line per element, however long.
"""
# ruff: noqa: E501

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.qa.__main__ import main
from pytest_longctx.experiments.qa.generate import OutputFiles, open_issue, review
from pytest_longctx.experiments.qa.generate_parse import item_problems, parse_reply, verbatim
from pytest_longctx.experiments.qa.generate_prompt import (
    EXAMPLES_FILE,
    build_request,
    excerpt,
    load_examples,
    pick_examples,
)
from pytest_longctx.experiments.qa.questions import Question, load_questions, normalize, validate
from pytest_longctx.server import FaultPlan, MessagesServer, Scripted
from tests.corpus_data import QUESTIONS

DATE = "2024-02-12"
MODEL = "anthropic/claude-test"
KEY = "test-key"
SCHEMA_KEYS = list(json.loads(QUESTIONS.read_text(encoding="utf-8").splitlines()[0]))


# Boeing 737 MAX aft rudder quadrant AD: a clean reply after one sentence of prose.
REPLY_BOEING = """Here are five questions about the FAA's emergency AD for the Boeing 737 MAX aft rudder quadrant.

<questions>
<question kind="text">
<text>According to FAA AD 2024–03–04 for Boeing 737–8, 737–8200, and 737–9 airplanes, why was the nut found in production under-torqued?</text>
<answer>The required run-on and final torques had not been applied to it</answer>
<distractor>The nut had been made from an incorrect alloy and had stretched over time</distractor>
<distractor>The bolt had been installed in the reverse direction at the factory</distractor>
<distractor>An unapproved washer had been substituted for the specified part</distractor>
<evidence>It was discovered that the required run-on and final torques had not been applied to the nut in production.</evidence>
</question>
<question kind="text">
<text>In the FAA's Boeing 737 MAX aft rudder quadrant AD, how could pilots still slowly move the rudder surface after the quadrant disconnected from the output rod?</text>
<answer>By adjusting the rudder trim position</answer>
<distractor>By using differential engine thrust</distractor>
<distractor>By engaging the standby hydraulic system</distractor>
<distractor>By pulling the manual reversion handle</distractor>
<evidence>The pilots would be able to slowly move the rudder surface by adjusting the rudder trim position but would be limited by the maximum rudder trim authority.</evidence>
</question>
<question kind="text">
<text>Which Boeing service information did the FAA review for AD 2024–03–04 on the 737 MAX aft rudder quadrant?</text>
<answer>Multi Operator Message MOM–MOM–23–0993–01B</answer>
<distractor>Service Bulletin 737–27–1330, Revision 2</distractor>
<distractor>Alert Requirements Bulletin 737–27A1345 RB</distractor>
<distractor>Multi Operator Message MOM–MOM–23–0883–01A</distractor>
<evidence>The FAA reviewed Boeing Multi Operator Message MOM–MOM–23–0993–01B, dated December 27, 2023.</evidence>
</question>
<question kind="text">
<text>Besides inspecting and replacing the bolt and nut, which corrective actions does the Boeing service information for the FAA's 737 MAX aft rudder quadrant AD specify if necessary?</text>
<answer>Torque application and a rudder travel test</answer>
<distractor>Bolt lubrication and a rudder pedal force check</distractor>
<distractor>Quadrant replacement and a yaw damper test</distractor>
<distractor>Cable re-tensioning and a trim calibration</distractor>
<evidence>inspection of the bolt and nut for damage and replacement as needed; torque application; and a rudder travel test.</evidence>
</question>
<question kind="numerical">
<text>Above what crosswind speed does the FAA say a disconnected aft rudder quadrant on Boeing 737–8, –8200, and –9 airplanes would leave too little rudder control during landing?</text>
<answer>20 kts</answer>
<distractor>15 kts</distractor>
<distractor>25 kts</distractor>
<distractor>35 kts</distractor>
<evidence>to counter a high crosswind (above 20 kts) during landing</evidence>
</question>
</questions>"""

# Pacific Council HMSAS meeting notice: in a code fence with HTML entities and a typographic
# apostrophe; six questions, three of them bad (evidence shared with the sister notice 2024-02819,
# "this notice", a repeated question).
REPLY_PACIFIC = """```xml
<questions>
<question kind="text">
<text>Which Pacific Fishery Management Council advisory body is holding the online meeting announced in NMFS notice RTID 0648&ndash;XD701?</text>
<answer>The Highly Migratory Species Advisory Subpanel</answer>
<distractor>The Highly Migratory Species Management Team</distractor>
<distractor>The Groundfish Advisory Subpanel</distractor>
<distractor>The Scientific and Statistical Committee</distractor>
<evidence>The Pacific Fishery Management Council&#39;s (Pacific Council) Highly Migratory Species Advisory Subpanel (HMSAS) is holding an online meeting.</evidence>
</question>
<question kind="text">
<text>For which meeting does the Pacific Council&#8217;s Highly Migratory Species Advisory Subpanel prepare reports at its February 28&ndash;March 1, 2024 online meeting?</text>
<answer>The Pacific Council's March 5–11, 2024 meeting</answer>
<distractor>The Western and Central Pacific Fisheries Commission's annual session</distractor>
<distractor>The Pacific Council's June 2024 meeting</distractor>
<distractor>The NMFS West Coast Region's spring stock assessment review</distractor>
<evidence>The purpose of this online meeting is for the HMSAS to discuss and prepare reports for agenda items on the Pacific Council’s March 5&ndash;11, 2024 meeting.</evidence>
</question>
<question kind="numerical">
<text>At what time does each day of the Pacific Council's February 28 to March 1, 2024 online advisory meeting start?</text>
<answer>8 a.m., Pacific standard time</answer>
<distractor>9 a.m., Pacific standard time</distractor>
<distractor>10 a.m., Pacific standard time</distractor>
<distractor>1 p.m., Pacific standard time</distractor>
<evidence>The meeting will start each day at 8 a.m., Pacific standard time and continue until business is completed on each day.</evidence>
</question>
<question kind="text">
<text>According to this notice, where is the Pacific Fishery Management Council's office located?</text>
<answer>Portland, Oregon</answer>
<distractor>Seattle, Washington</distractor>
<distractor>Sacramento, California</distractor>
<distractor>Juneau, Alaska</distractor>
<evidence>Pacific Fishery Management Council, 7700 NE Ambassador Place, Suite 101, Portland, OR 97220&ndash;1384.</evidence>
</question>
<question kind="text">
<text>Which RTID number identifies the NMFS notice of the Pacific Council Highly Migratory Species Advisory Subpanel's online meeting?</text>
<answer>0648–XD701</answer>
<distractor>0648–XD702</distractor>
<distractor>0648–XD710</distractor>
<distractor>0648–XD071</distractor>
<evidence>[RTID 0648–XD701]</evidence>
</question>
<question kind="text">
<text>Which Pacific Fishery Management Council advisory body is holding the online meeting announced in NMFS notice RTID 0648–XD701?</text>
<answer>The Highly Migratory Species Advisory Subpanel (HMSAS)</answer>
<distractor>The Highly Migratory Species Management Team (HMSMT)</distractor>
<distractor>The Groundfish Advisory Subpanel (GAP)</distractor>
<distractor>The Scientific and Statistical Committee (SSC)</distractor>
<evidence>Highly Migratory Species Advisory Subpanel (HMSAS) is holding an online meeting</evidence>
</question>
</questions>
```"""

# Neighborhood Reinvestment Corporation Sunshine Act notice: prose around, four questions instead
# of five, duplicated options, paraphrased evidence, and a last question cut off without its evidence.
REPLY_NEIGHBORWORKS = """Sure! Below are questions about the Neighborhood Reinvestment Corporation's board meeting notice.

<questions>
<question kind="text">
<text>Where will the Neighborhood Reinvestment Corporation hold its February 15, 2024 Board of Directors meeting?</text>
<answer>1255 Union Street NE, Suite 500, Washington, DC</answer>
<distractor>1325 G Street NW, Suite 800, Washington, DC</distractor>
<distractor>999 North Capitol Street NE, Suite 900, Washington, DC</distractor>
<distractor>1255 Union Street NE, Suite 300, Washington, DC</distractor>
<evidence>1255 Union Street NE, Suite 500, Washington, DC 20002.</evidence>
</question>
<question kind="text">
<text>Which Neighborhood Reinvestment Corporation officer certified that Sunshine Act exemptions permit closing part of its February 15, 2024 board meeting?</text>
<answer>The Interim General Counsel</answer>
<distractor>The Chief Executive Officer</distractor>
<distractor>the interim general counsel</distractor>
<distractor>The Chief Financial Officer</distractor>
<evidence>The Interim General Counsel of the Corporation has certified that in her opinion, one or more of the exemptions set forth in the Government in the Sunshine Act</evidence>
</question>
<question kind="text">
<text>Which board member is to be recognized for service at the Neighborhood Reinvestment Corporation's February 15, 2024 board meeting?</text>
<answer>Rodney Hood</answer>
<distractor>Jenna Sylvester</distractor>
<distractor>Rodney Davis</distractor>
<distractor>Marcia Fudge</distractor>
<evidence>Action Item: Resolution recognizing the service of Board Member Rodney Hood</evidence>
</question>
<question kind="numerical">
<text>At what time on February 15, 2024 does the Neighborhood Reinvestment Corporation's board meeting begin?</text>
<answer>2:00 p.m.</answer>
<distractor>10:00 a.m.</distractor>
<distractor>1:00 p.m.</distractor>
<distractor>3:30 p.m.</distractor>

I hope these questions are useful for your evaluation."""

# Summer flounder quota transfer (one of the default example sections): the format ignored.
REPLY_FLOUNDER = """1. **How many pounds of summer flounder quota did North Carolina transfer to Virginia?**
   - A) 14,280 lb (correct)
   - B) 6,477 lb
   - C) 41,280 lb
   - D) 12,840 lb
2. **Who must concur with a state-to-state quota transfer?** The NMFS Greater Atlantic Regional Administrator."""

# -- a synthetic issue of another date (two kept sections would need ~400 tokens each; one is enough) --

OTHER_DATE = "2024-03-04"
OTHER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<FEDREG>
<DATE>Monday, March 4, 2024</DATE>
<UNITNAME>Contents</UNITNAME>
<CNTNTS><P>Railroad Administration: Petition for Waiver of Compliance, 15512</P></CNTNTS>
<NOTICES>
<NOTICE>
<AGENCY>DEPARTMENT OF TRANSPORTATION</AGENCY>
<SUBAGY>Federal Railroad Administration</SUBAGY>
<DEPDOC>[Docket Number FRA–2024–0021]</DEPDOC>
<SUBJECT>Petition for Waiver of Compliance</SUBJECT>
<P>Under part 211 of title 49 Code of Federal Regulations (CFR), this document provides the public notice that on
February 20, 2024, the Cumbres &amp; Toltec Scenic Railroad (CTSR) petitioned the Federal Railroad Administration
(FRA) for a waiver of compliance from certain provisions of the Federal railroad safety regulations contained at
49 CFR part 223, Safety Glazing Standards&#8212;Locomotives, Passenger Cars and Cabooses. The relevant Docket
Number is FRA&#8211;2024&#8211;0021.</P>
<P>Specifically, CTSR requests relief from &#167; 223.11, Requirements for existing locomotives, and &#167; 223.15,
Requirements for existing passenger cars, for four steam locomotives (numbers 463, 484, 487, and 489) and eleven
historic coaches that operate on its 64-mile line between Chama, New Mexico, and Antonito, Colorado. CTSR explains
that the equipment was built between 1902 and 1925, that it operates only in daylight at speeds not exceeding
15 miles per hour, and that certified glazing would alter the historic character of the narrow gauge equipment.
CTSR states that the line crosses no highway overpasses and that vandalism has not been reported on the route
in the last 20 years.</P>
<P>A copy of the petition, as well as any written communications concerning the petition, is available for review
online at www.regulations.gov. Interested parties are invited to participate in these proceedings by submitting
written views, data, or comments. FRA does not anticipate scheduling a public hearing in connection with these
proceedings since the facts do not appear to warrant a hearing. Communications received by April 18, 2024, will
be considered by FRA before final action is taken. Comments received after that date will be considered if
practicable.</P>
<SIG><NAME>John Karl Alexy,</NAME><TITLE>Associate Administrator for Railroad Safety, Chief Safety Officer.</TITLE></SIG>
<FRDOC>[FR Doc. 2024&#8211;04512 Filed 3&#8211;1&#8211;24; 8:45 am]</FRDOC>
<BILCOD>BILLING CODE 4910&#8211;06&#8211;P</BILCOD>
</NOTICE>
</NOTICES>
</FEDREG>
"""
REPLY_RAILROAD = """<questions>
<question kind="text">
<text>Which railroad petitioned FRA for a waiver from the 49 CFR part 223 safety glazing standards in Docket Number FRA–2024–0021?</text>
<answer>The Cumbres &amp; Toltec Scenic Railroad</answer>
<distractor>The Durango &amp; Silverton Narrow Gauge Railroad</distractor>
<distractor>The Grand Canyon Railway</distractor>
<distractor>The Mount Washington Cog Railway</distractor>
<evidence>the Cumbres &amp; Toltec Scenic Railroad (CTSR) petitioned the Federal Railroad Administration (FRA) for a waiver of compliance</evidence>
</question>
<question kind="text">
<text>Between which two towns does the Cumbres &amp; Toltec Scenic Railroad line covered by its FRA glazing waiver petition run?</text>
<answer>Chama, New Mexico, and Antonito, Colorado</answer>
<distractor>Durango and Silverton, Colorado</distractor>
<distractor>Williams and Grand Canyon, Arizona</distractor>
<distractor>Alamosa, Colorado, and Taos, New Mexico</distractor>
<evidence>its 64-mile line between Chama, New Mexico, and Antonito, Colorado</evidence>
</question>
<question kind="text">
<text>Why does the Cumbres &amp; Toltec Scenic Railroad say certified glazing should not be required on its steam locomotives and coaches?</text>
<answer>It would alter the historic character of the equipment</answer>
<distractor>It cannot be fitted to the locomotives' curved window frames</distractor>
<distractor>Its cost would exceed the railroad's annual budget</distractor>
<distractor>No certified supplier makes glazing for narrow gauge cars</distractor>
<evidence>certified glazing would alter the historic character of the narrow gauge equipment</evidence>
</question>
<question kind="text">
<text>Does FRA plan a public hearing on the Cumbres &amp; Toltec Scenic Railroad's safety glazing waiver petition?</text>
<answer>No, the facts do not appear to warrant one</answer>
<distractor>Yes, in Chama on April 18, 2024</distractor>
<distractor>Only if more than ten comments request one</distractor>
<distractor>Yes, as a virtual hearing in March 2024</distractor>
<evidence>FRA does not anticipate scheduling a public hearing in connection with these proceedings since the facts do not appear to warrant a hearing.</evidence>
</question>
<question kind="numerical">
<text>How many steam locomotives does the Cumbres &amp; Toltec Scenic Railroad's FRA safety glazing waiver petition cover?</text>
<answer>Four</answer>
<distractor>Three</distractor>
<distractor>Six</distractor>
<distractor>Eleven</distractor>
<evidence>for four steam locomotives (numbers 463, 484, 487, and 489)</evidence>
</question>
</questions>"""


# -- harness ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path, fr_data_dir: str) -> Path:
    """The shared issue's section cache, built once per session (each test copies it into its own cache),
    with the issue itself linked in, so runs find it in their cache as a user's second run would."""
    cache = tmp_path_factory.getbasetemp() / "qa-fr-cache"
    if not cache.is_dir():
        building = tmp_path_factory.mktemp("qa-fr-cache-build")
        open_issue(DATE, fr_data_dir, building)
        building.rename(cache)
    linked = cache / "corpora" / fr_xml.name
    if not linked.exists():
        linked.symlink_to(fr_xml)
    return cache / "corpora"


@pytest.fixture(scope="module")
def sections(corpora: Path) -> dict[str, str]:
    return {s.id: s.text for s in open_issue(DATE, None, corpora.parent).sections}


@pytest.fixture
def cache_dir(tmp_path: Path, corpora: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(corpora, target / "corpora", symlinks=True)
    return target


REPLIES = {
    "2024-02930": REPLY_BOEING,
    "2024-02823": REPLY_PACIFIC,
    "2024-02868": REPLY_NEIGHBORWORKS,
    "2024-02795": REPLY_FLOUNDER,
    "2024-04512": REPLY_RAILROAD,
}
#: What the model says about sections without a recording: a refusal (an unparseable reply).
REFUSAL = "I'm sorry, but I can't help with writing exam questions about this section."


@contextmanager
def serve(monkeypatch: pytest.MonkeyPatch, replies: Mapping[str, str] = REPLIES, *, default: str | None = REFUSAL,
          faults: FaultPlan | None = None) -> Iterator[MessagesServer]:
    """The Messages API server answering each section's request with its recorded reply."""
    keyed = {f"section {sid}:": reply for sid, reply in replies.items()}
    with MessagesServer(Scripted(keyed, default=default), api_key=KEY, faults=faults) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        yield srv


def generate(capsys: pytest.CaptureFixture[str], cache_dir: Path, out: Path, *args: str,
             date: str = DATE, data_dir: str | None = None) -> tuple[int, str, str]:
    found = ["--data-dir", data_dir] if data_dir else []  # else the issue linked into the cache (see corpora)
    code = main(["generate", "--date", date, "--model", MODEL, *found, "--cache-dir", str(cache_dir),
                 "--out", str(out), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sections_of(*ids: str) -> list[str]:
    return [arg for sid in ids for arg in ("--section", sid)]


def target_of(body: Mapping[str, Any]) -> str:
    return _section_in(body["messages"][-1]["content"])


def examples_of(body: Mapping[str, Any]) -> list[str]:
    return [_section_in(m["content"]) for m in body["messages"][:-1] if m["role"] == "user"]


def _section_in(text: str) -> str:
    return text.split("section ", 1)[1].split(":", 1)[0].removesuffix(" (excerpt)")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the command end to end ------------------------------------------------------------------------


def test_generate_keeps_valid_items_and_reports_the_rest(monkeypatch, capsys, cache_dir, tmp_path, sections) -> None:
    out = tmp_path / "FR-2024-02-12.generated.jsonl"
    with serve(monkeypatch, faults=FaultPlan(sequence=("529",))) as srv:
        code, stdout, stderr = generate(capsys, cache_dir, out, *sections_of("2024-02868", "2024-02930", "2024-02823"))
    assert (code, stderr) == (0, "")
    stats = srv.stats
    assert stats.faults == {"529": 1} and stats.endpoints == {"messages": 4}  # the overloaded request was retried
    assert sorted(target_of(b) for b in stats.requests[1:]) == ["2024-02823", "2024-02868", "2024-02930"]
    assert all(b["temperature"] == 0.0 and b["model"] == "claude-test" for b in stats.requests)

    kept = load_questions(out)
    assert [q.id for q in kept] == [f"2024-02930/q{n}" for n in range(1, 6)] + [
        "2024-02823/q1", "2024-02823/q2", "2024-02823/q5", "2024-02868/q1"]  # issue order
    assert validate(kept, sections) == [] and all(item_problems(q) == [] for q in kept)
    assert all(list(r) == SCHEMA_KEYS for r in records(out))  # the shipped schema, key for key
    by_id = {q.id: q for q in kept}
    assert by_id["2024-02823/q1"].evidence.startswith("The Pacific Fishery Management Council's (Pacific")  # &#39;
    assert by_id["2024-02823/q2"].evidence.endswith("on the Pacific Council's March 5–11, 2024 meeting.")  # ’ → '
    assert by_id["2024-02930/q5"].kind == "numerical"

    rejected_file = out.with_name("FR-2024-02-12.generated.rejected.jsonl")
    rejected = {r.get("id"): (r["stage"], r["reason"]) for r in records(rejected_file)}
    assert rejected == {
        "2024-02823/q3": ("rejected", "evidence also occurs in section(s) 2024-02819"),
        "2024-02823/q4": ("rejected", "evidence also occurs in section(s) 2024-02819, 2024-02820; "
                                      "question says 'this document'; name the agency or subject"),
        "2024-02823/q6": ("rejected", "repeats the question of q1"),
        "2024-02868/q2": ("rejected", "options are not distinct"),
        "2024-02868/q3": ("rejected", "evidence not found in section 2024-02868"),
        "2024-02868/q4": ("unparseable", "missing <evidence>"),
    }
    assert "2024-02930: kept 5 (4 text + 1 numerical), rejected 0, unparseable 0\n" in stdout
    assert ("2024-02823: kept 3 (3 text + 0 numerical), rejected 3, unparseable 0; "
            "the reply had 6 questions, not 5\n") in stdout
    assert ("2024-02868: kept 1 (1 text + 0 numerical), rejected 2, unparseable 1; "
            "the reply had 4 questions, not 5\n") in stdout
    assert "    2024-02868/q3 rejected: evidence not found in section 2024-02868\n" in stdout
    assert "this run: 3 sections, kept 9, rejected 5, unparseable 1, failed 0 section(s)" in stdout


def test_few_shot_examples_come_from_other_sections(monkeypatch, capsys, cache_dir, tmp_path, sections) -> None:
    out = tmp_path / "q.jsonl"
    with serve(monkeypatch) as srv:
        code, stdout, _ = generate(capsys, cache_dir, out, *sections_of("2024-02930", "2024-02795", "2024-02758"))
    assert code == 0
    bodies = {target_of(b): b for b in srv.stats.requests}
    assert {sid: examples_of(b) for sid, b in bodies.items()} == {
        "2024-02930": ["2024-02795", "2024-02758"],
        "2024-02795": ["2024-02758", "2024-02784"],  # never the section asked about
        "2024-02758": ["2024-02795", "2024-02784"],
    }
    shipped = {q.id: q for q in load_questions(QUESTIONS)}
    body = bodies["2024-02795"]
    assert "2024-02784 (excerpt):" in body["messages"][2]["content"] and "[...]" in body["messages"][2]["content"]
    for user, assistant in zip(body["messages"][0:4:2], body["messages"][1:4:2], strict=True):
        sid = _section_in(user["content"])
        example = review(sid, assistant["content"], sections)  # the examples pass the same checks
        assert len(example.kept) == 5 and example.rejected == []
        assert {q.question for q in example.kept} == {q.question for q in shipped.values() if q.section_id == sid}
        shown = normalize(user["content"])
        assert all(normalize(q.evidence) in shown for q in example.kept)  # the excerpt keeps every quote
    assert "2024-02795: kept 0 (0 text + 0 numerical), rejected 0, unparseable 1; no <question> element" in stdout
    unparseable = records(tmp_path / "q.rejected.jsonl")
    assert [(r["section_id"], r["stage"]) for r in unparseable] == [("2024-02795", "unparseable"),
                                                                    ("2024-02758", "unparseable")]
    assert unparseable[0]["raw"] == REPLY_FLOUNDER


def test_generate_for_another_issue_date(monkeypatch, capsys, cache_dir, tmp_path, fr_xml) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / f"FR-{OTHER_DATE}.xml").write_text(OTHER_XML, encoding="utf-8")
    (data / f"FR-{DATE}.xml").symlink_to(fr_xml)  # the examples' issue
    out = tmp_path / "other.jsonl"
    with serve(monkeypatch) as srv:
        code, stdout, _ = generate(capsys, cache_dir, out, date=OTHER_DATE, data_dir=str(data))
    assert code == 0
    (body,) = srv.stats.requests
    assert body["messages"][-1]["content"].startswith(f"Federal Register of {OTHER_DATE}, section 2024-04512:\n")
    assert examples_of(body) == ["2024-02795", "2024-02758"]
    assert body["messages"][0]["content"].startswith(f"Federal Register of {DATE}, section 2024-02795:")
    kept = load_questions(out)
    assert [q.kind for q in kept] == ["text"] * 4 + ["numerical"]
    assert kept[0].answer == "The Cumbres & Toltec Scenic Railroad"  # &amp; decoded
    assert f"FR {OTHER_DATE}: 1 kept sections, 1 selected, 0 already written (skipped), 1 to generate" in stdout


def test_a_rerun_skips_sections_already_written(monkeypatch, capsys, cache_dir, tmp_path) -> None:
    out = tmp_path / "q.jsonl"
    with serve(monkeypatch) as srv:
        generate(capsys, cache_dir, out, "--no-cache", *sections_of("2024-02930", "2024-02868"))
        first = load_questions(out)
        code, stdout, _ = generate(capsys, cache_dir, out, "--no-cache",
                                   *sections_of("2024-02930", "2024-02868", "2024-02823"))
        assert code == 0 and srv.stats.endpoints == {"messages": 3}
        assert "3 selected, 2 already written (skipped), 1 to generate" in stdout
        code, stdout, _ = generate(capsys, cache_dir, out, "--no-cache",
                                   *sections_of("2024-02930", "2024-02868", "2024-02823"))
        assert code == 0 and srv.stats.endpoints == {"messages": 3}
        assert "3 already written (skipped), 0 to generate" in stdout
    ids = [q.id for q in load_questions(out)]
    assert ids[:5] == [q.id for q in first][:5] and ids[5:8] == ["2024-02823/q1", "2024-02823/q2", "2024-02823/q5"]
    assert len(ids) == len(set(ids)) == 9


def test_a_failed_call_is_reported_and_retried_by_the_next_run(monkeypatch, capsys, cache_dir, tmp_path) -> None:
    from pytest_longctx.backends import anthropic as backend_module
    from pytest_longctx.backends.retry import RetryPolicy

    monkeypatch.setattr(backend_module, "RetryPolicy", lambda: RetryPolicy(attempts=2, base_s=0.01))
    out = tmp_path / "q.jsonl"
    partial = {sid: REPLIES[sid] for sid in ("2024-02930",)}
    with serve(monkeypatch, partial, default=None) as srv:  # no recording for 2024-02868: HTTP 500 every time
        code, stdout, _ = generate(capsys, cache_dir, out, *sections_of("2024-02930", "2024-02868"))
    assert code == 1 and srv.stats.errors == {"api_error": 2}
    assert "2024-02868: FAILED (anthropic: gave up after 2 attempts; last error InternalServerError" in stdout
    assert "run the same command again to retry them" in stdout
    assert {q.section_id for q in load_questions(out)} == {"2024-02930"}
    assert not out.with_name("q.rejected.jsonl").exists()
    with serve(monkeypatch) as srv:
        code, stdout, _ = generate(capsys, cache_dir, out, *sections_of("2024-02930", "2024-02868"))
    assert code == 0 and [target_of(b) for b in srv.stats.requests] == ["2024-02868"]
    assert "1 already written (skipped), 1 to generate" in stdout


def test_an_auth_error_stops_the_run_with_one_line(monkeypatch, capsys, cache_dir, tmp_path) -> None:
    with serve(monkeypatch, faults=FaultPlan(sticky="auth")):
        code, _, stderr = generate(capsys, cache_dir, tmp_path / "q.jsonl", *sections_of("2024-02930", "2024-02868"))
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("error: anthropic: AuthenticationError")
    assert "rerun to resume" in stderr


def test_sections_n_takes_the_first_kept_sections(monkeypatch, capsys, cache_dir, tmp_path) -> None:
    with serve(monkeypatch) as srv:
        code, stdout, _ = generate(capsys, cache_dir, tmp_path / "q.jsonl", "--sections", "2", "--concurrency", "1")
    assert code == 0
    assert sorted(target_of(b) for b in srv.stats.requests) == ["2024-02701", "2024-02930"]
    assert "79 kept sections, 2 selected" in stdout
    assert "2024-02701: kept 0 (0 text + 0 numerical), rejected 0, unparseable 1" in stdout


def test_replies_are_cached_unless_no_cache(monkeypatch, capsys, cache_dir, tmp_path) -> None:
    with serve(monkeypatch) as srv:
        generate(capsys, cache_dir, tmp_path / "a.jsonl", *sections_of("2024-02930"))
        generate(capsys, cache_dir, tmp_path / "b.jsonl", *sections_of("2024-02930"))
        assert srv.stats.endpoints == {"messages": 1}
        generate(capsys, cache_dir, tmp_path / "c.jsonl", "--no-cache", *sections_of("2024-02930"))
        assert srv.stats.endpoints == {"messages": 2}
    texts = {(tmp_path / name).read_text() for name in ("a.jsonl", "b.jsonl", "c.jsonl")}
    assert len(texts) == 1


# -- parsing ---------------------------------------------------------------------------------------


def test_parse_reads_fences_entities_cdata_and_unclosed_tags() -> None:
    reply = """Sure, here you go:
```xml
<questions>
<question kind='numerical'>
<text>How many R&amp;D grants did NIST award?</text>
<answer><![CDATA[12 <grants>]]></answer>
<distractor>10</distractor><distractor>14
<distractor>20</distractor>
<evidence>"NIST awarded 12 grants"</evidence>
<question type="Text"><text>Who signed it?<answer>Jane Doe</answer>
<distractor>A</distractor>
<evidence>Jane Doe,</evidence>

Hope this helps!
```"""
    first, second = parse_reply(reply)
    assert (first.kind, first.question, first.answer) == ("numerical", "How many R&D grants did NIST award?", "12")
    assert first.distractors == ["10", "14", "20"] and first.evidence == "NIST awarded 12 grants"
    assert (second.kind, second.question, second.answer, second.distractors) == ("text", "Who signed it?", "Jane Doe",
                                                                                  ["A"])
    assert second.evidence == "Jane Doe,"  # the unclosed tag ends at the blank line, not in the prose


def test_parse_without_question_wrappers_and_kind_inference() -> None:
    reply = ("<text>When is the meeting?</text><answer>March 3, 2024</answer><distractor>March 4, 2024</distractor>"
             "<distractor>March 5, 2024</distractor><distractor>March 6, 2024</distractor><evidence>March 3</evidence>"
             "<text>Who chairs it?</text><answer>The Secretary</answer><evidence>Secretary</evidence>")
    drafts = parse_reply(reply)
    assert [(d.n, d.kind, d.question) for d in drafts] == [(1, "numerical", "When is the meeting?"),
                                                           (2, "text", "Who chairs it?")]
    assert parse_reply("No questions today.") == [] and parse_reply("") == []
    assert parse_reply("<questions></questions>") == []


def test_verbatim_matches_up_to_whitespace_dashes_and_quotes() -> None:
    text = "The FAA  reviewed\nBoeing MOM–MOM–23–0993–01B, the “good cause” finding, and the Council's agenda."
    assert verbatim("reviewed Boeing MOM-MOM-23-0993-01B", text) == "reviewed Boeing MOM–MOM–23–0993–01B"
    assert verbatim('the "good cause" finding', text) == "the “good cause” finding"
    assert verbatim("the Council’s agenda.", text) == "the Council's agenda."
    assert verbatim("the Council's meeting", text) is None and verbatim("   ", text) is None


def test_item_checks_catch_what_validate_does_not() -> None:
    good = Question("s/q1", "s", "numerical", "How many pounds did North Carolina transfer?", "14,280 lb",
                    ("6,477 lb", "41,280 lb", "12,840 lb"), "14,280 pounds")
    assert item_problems(good) == []
    assert item_problems(Question("s/q2", "s", "numerical", "Who signed the NMFS notice?", "Everett Baxter",
                                  ("A", "B", "C"), "x")) == ["numerical question whose answer states no number"]
    problems = item_problems(Question("s/q3", "s", "text", "According to the passage, which state is Virginia",
                                      "Virginia", ("Ohio", "Maine", "x" * 301), "x"))
    assert problems == ["question does not end with '?'", "question refers to 'the passage/text'; name the agency or "
                        "subject", "an option is longer than 300 characters",
                        "the question gives the answer away (it contains it)"]
    assert [p for q in load_questions(QUESTIONS) for p in item_problems(q)] == []  # the shipped set passes


def test_review_checks_distractor_counts_duplicates_and_the_per_section_quota(sections) -> None:
    text = sections["2024-02758"]

    def block(kind: str, question: str, answer: str, distractors: list[str], evidence: str) -> str:
        ds = "".join(f"<distractor>{d}</distractor>" for d in distractors)
        return (f'<question kind="{kind}"><text>{question}</text><answer>{answer}</answer>{ds}'
                f"<evidence>{evidence}</evidence></question>")

    subject = "in EXIM transaction AP089416XX"
    reply = "\n".join([
        block("text", f"Who is the principal supplier {subject}?", "SLB", ["Halliburton", "Baker Hughes"],
              "Principal Supplier: SLB."),
        block("text", f"Who is the obligor {subject}?", "Bapco Energies B.S.C. (Bahrain)",
              ["Kuwait Oil Company", "QatarEnergy LNG", "Saudi Aramco"], "Bapco Energies B.S.C. (Bahrain)."),
        block("text", f"Who is the  OBLIGOR {subject}?", "Bapco", ["KOC", "QE", "Aramco"], "Bapco Energies"),
        block("numerical", f"By what date must comments {subject} be received?", "March 8, 2024",
              ["March 13, 2024", "February 28, 2024", "March 11, 2024"], "on or before March 8, 2024"),
        block("numerical", f"Which section of the Export-Import Bank Act authorizes EXIM's public notice {subject}?",
              "Section 3(c)(10)", ["Section 2(b)(1)", "Section 8(a)", "Section 11(c)(2)"],
              "Section 3(c)(10) of the Export-Import Bank Act of 1945"),
    ])
    outcome = review("2024-02758", reply, {**sections, "2024-02758": text})
    assert [q.id for q in outcome.kept] == ["2024-02758/q2", "2024-02758/q4"]
    assert [(r["id"], r["reason"]) for r in outcome.rejected] == [
        ("2024-02758/q1", "2 distractors (exactly 3 needed)"),
        ("2024-02758/q3", "repeats the question of q2"),
        ("2024-02758/q5", "one numerical question too many (a section gets 4 text + 1 numerical)"),
    ]


# -- the prompt ------------------------------------------------------------------------------------


def test_examples_are_trimmed_around_their_evidence(sections) -> None:
    shipped = [q for q in load_questions(QUESTIONS) if q.section_id == "2024-02930"]
    text, trimmed = excerpt(sections["2024-02930"], [q.evidence for q in shipped], limit=3000)
    assert trimmed and text.startswith("DEPARTMENT OF TRANSPORTATION\nFederal Aviation Administration")
    assert len(text) < 4000 < len(sections["2024-02930"]) and text.count("[...]") >= 2
    assert all(normalize(q.evidence) in normalize(text) for q in shipped)
    short = sections["2024-02758"]
    assert excerpt(short, []) == ("\n".join(normalize(x) for x in short.splitlines() if x.strip()), False)


def test_request_is_few_shot_at_temperature_zero(sections) -> None:
    examples = load_examples(load_questions(EXAMPLES_FILE), sections)
    for target in ("2024-02795", "2024-02758", "2024-02784", "2024-02930"):
        picked = pick_examples(examples, target)
        assert len(picked) == 2 and target not in [e.section_id for e in picked]
    request = build_request("2024-02930", sections["2024-02930"], DATE, pick_examples(examples, "2024-02930"))
    assert request.temperature == 0.0 and request.template == "fr-qa-generate@1" and request.max_tokens == 2048
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert "four with kind=\"text\"" in (request.system or "") and "<evidence>" in (request.system or "")
    assert [len(parse_reply(m.content)) for m in request.messages if m.role == "assistant"] == [5, 5]


def test_output_files_read_and_sort(tmp_path) -> None:
    files = OutputFiles(tmp_path / "FR-x.generated.jsonl")
    assert files.rejected.name == "FR-x.generated.rejected.jsonl" and files.done() == set()
    files.out.write_text('{"id": "b/q2", "section_id": "b"}\n{"id": "a/q10", "section_id": "a"}\n'
                         '{"id": "a/q2", "section_id": "a"}\n')
    files.rejected.write_text('{"section_id": "c", "stage": "unparseable"}\n')
    assert files.done() == {"a", "b", "c"}
    files.sort({"a": 0, "b": 1})
    assert [r["id"] for r in records(files.out)] == ["a/q2", "a/q10", "b/q2"]
