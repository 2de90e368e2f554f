"""The HTML report in a real browser: headless Chromium renders it offline, takes a screenshot,
and shows that a script hidden in a model answer never runs.

Skipped only when /usr/bin/chromium is missing (CI installs the Debian ``chromium`` package).
Set LONGCTX_KEEP_SCREENSHOT=1 to copy the screenshot to reports/screenshots/ in the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_longctx.reporting.html import render_html
from tests import report_data as data

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
SCREENSHOT = Path("reports/screenshots/longctx-report.png")
REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="headless browser test: /usr/bin/chromium not installed "
                                 "(apt-get install chromium)")]


def _html(record: dict) -> str:
    return render_html(record, data.builtin_sections(record))


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a throwaway profile; no network services, nothing fetched."""
    cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def write_report(tmp: Path, record: dict[str, Any]) -> Path:
    path = tmp / "reports" / "longctx.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(record, data.builtin_sections(record)), encoding="utf-8")
    return path


def decode_png(blob: bytes) -> np.ndarray:
    """Pixels (height, width, channels) of an 8-bit RGB/RGBA, non-interlaced PNG, with stdlib zlib."""
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos:pos + 4])
        kind, body = blob[pos + 4:pos + 8], blob[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    assert header is not None
    width, height, depth, color_type, _, _, interlace = header
    assert depth == 8 and color_type in (2, 6) and interlace == 0, header
    bpp = 3 if color_type == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.int64)
    prev = np.zeros(width * bpp, dtype=np.int64)
    for y in range(height):
        kind, line = int(raw[y, 0]), raw[y, 1:].astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average or Paeth: sequential within the row
            c, p = line.tolist(), prev.tolist()
            for i in range(len(c)):
                a = c[i - bpp] if i >= bpp else 0
                if kind == 3:
                    c[i] = (c[i] + (a + p[i]) // 2) & 255
                else:
                    up_left = p[i - bpp] if i >= bpp else 0
                    pa, pb, pc = abs(p[i] - up_left), abs(a - up_left), abs(a + p[i] - 2 * up_left)
                    c[i] = (c[i] + (a if pa <= pb and pa <= pc else p[i] if pb <= pc else up_left)) & 255
            cur = np.array(c, dtype=np.int64)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp).astype(np.uint8)


class Dom(HTMLParser):
    """Title, element counts and visible text of a --dump-dom result."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.counts: dict[str, int] = {}
        self.title = ""
        self.text: list[str] = []
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        while self._in and self._in.pop() != tag:
            pass

    def handle_data(self, text: str) -> None:
        if self._in and self._in[-1] == "title" and "head" in self._in:
            self.title += text
        elif "script" not in self._in[-1:]:
            self.text.append(text)


def test_screenshot_of_the_report(tmp_path: Path) -> None:
    record = data.showcase_record(tmp_path, payload=data.PAYLOAD)
    report = write_report(tmp_path, record)
    shot = tmp_path / SCREENSHOT
    shot.parent.mkdir(parents=True, exist_ok=True)
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,4000", report.as_uri())
    assert shot.is_file() and shot.stat().st_size > 50_000
    pixels = decode_png(shot.read_bytes())
    assert pixels.shape[:2] == (4000, 1400)
    rgb = pixels[:, :, :3].astype(np.int64)
    colours = np.unique((rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2])
    assert len(colours) > 500, "screenshot looks blank"
    # The FAIL badge (#b91c1c) and coloured charts were painted, not just text on a background.
    assert (rgb == (185, 28, 28)).all(axis=2).sum() > 5_000
    saturated = (rgb.max(axis=2) - rgb.min(axis=2)) > 80
    assert saturated.sum() > 30_000, "no coloured charts in view"
    rows_with_ink = (rgb.std(axis=1).max(axis=1) > 10).sum()
    assert rows_with_ink > 1_400, "most of the page is empty"
    if os.environ.get("LONGCTX_KEEP_SCREENSHOT") == "1":
        kept = REPO / SCREENSHOT
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, kept)


def test_rendered_dom_has_the_charts_and_record(tmp_path: Path) -> None:
    record = data.showcase_record(tmp_path)
    report = write_report(tmp_path, record)
    dom = chromium(tmp_path, "--dump-dom", "--virtual-time-budget=3000", report.as_uri()).stdout
    parsed = Dom(dom)
    assert parsed.counts.get("svg") == 15  # qa 4 + 3 small multiples, controls 1, lrt 2, docs 4, demo 1
    assert parsed.counts.get("table", 0) >= 7
    assert parsed.title == f"longctx · {record['settings']['model']} · gate fail"
    assert 'id="longctx-record"' in dom


def test_script_in_a_model_answer_does_not_run(tmp_path: Path) -> None:
    record = data.make_record(tmp_path, samples=3, payload=data.PAYLOAD, thresholds=("*:0.0",))
    record["stopped"] = data.PAYLOAD
    report = write_report(tmp_path, record)
    dom = chromium(tmp_path, "--dump-dom", "--virtual-time-budget=3000", report.as_uri()).stdout
    parsed = Dom(dom)
    assert parsed.title == f"longctx · {record['settings']['model']} · gate pass"
    assert "PWNED" not in parsed.title
    assert parsed.counts.get("img", 0) == 0
    assert parsed.counts.get("script") == 2  # the embedded record and the report's own script
    text = " ".join(" ".join(parsed.text).split())
    assert text.count(data.PAYLOAD) >= 3  # two answers and the stop reason, shown as text
    assert re.search(r"<script>document\.title", dom) is None


#: The reports a person opens: one model alone, a compared run, a run where every trial errored.
KINDS = {"single": data.single_record, "compared": data.showcase_record, "errors": data.error_record,
         "models": data.models_record}
#: Window widths (px) the report must fit, and the height of the first screen.
WIDTHS, FIRST_SCREEN = (1400, 800), 900
#: Measured in the page once it has loaded (no waiting on a clock): where the decision table starts, and every box
#: whose text does not fit it. The result goes into the title, which --dump-dom prints.
LAYOUT_CHECK = """<script>addEventListener("load", function () {
  var out = {problems: []}, table = document.querySelector("table.decision");
  out.tableTop = table ? table.getBoundingClientRect().top : null;
  out.viewport = [innerWidth, innerHeight];
  if (document.documentElement.scrollWidth > innerWidth) out.problems.push("page wider than the window: " +
      document.documentElement.scrollWidth);
  if (table && table.getBoundingClientRect().right > table.parentNode.getBoundingClientRect().right + 1)
    out.problems.push("decision table wider than its section");
  document.querySelectorAll("header *, #decision *, td, th, figcaption, .legend li, .panel-title, dd, .note").forEach(
    function (el) {
      if (el.clientWidth && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "auto")
        out.problems.push("text overflows <" + el.tagName.toLowerCase() + ">: " + el.textContent.slice(0, 60));
    });
  document.querySelectorAll(".scroll").forEach(function (el) {  // a table cut at the box's edge reads as clipped
    if (el.clientWidth && el.scrollWidth > el.clientWidth + 1 && !el.closest("details:not([open])"))
      out.problems.push("table wider than its box (" + el.scrollWidth + " > " + el.clientWidth + "): " +
                        el.textContent.slice(0, 60));
  });
  document.querySelectorAll("svg.chart text").forEach(function (t) {
    var r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
    if (r.width && (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1))
      out.problems.push("chart text outside its chart: " + t.textContent.slice(0, 60));
  });
  document.title = "LAYOUT " + JSON.stringify(out);
});</script>"""


@pytest.fixture(scope="module", params=list(KINDS))
def report_kind(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp(request.param)
    return request.param, write_report(tmp, KINDS[request.param](tmp))


@pytest.mark.parametrize("width", WIDTHS)
def test_decision_table_in_the_first_screen_and_nothing_overflows(report_kind: tuple[str, Path], width: int) -> None:
    kind, report = report_kind
    found = layout(report.parent, report, width)
    assert found["viewport"][0] == width  # (headless Chromium takes its window frame off the height)
    screen = min(found["viewport"][1], FIRST_SCREEN)
    assert found["tableTop"] is not None and 0 < found["tableTop"] < screen, (kind, width, found["tableTop"])
    assert found["problems"] == [], (kind, width)


def layout(tmp: Path, page: Path, width: int) -> dict[str, Any]:
    """What :data:`LAYOUT_CHECK` measured in ``page`` at ``width`` px."""
    checked = page.with_name(f"checked-{width}-{page.name}")
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", LAYOUT_CHECK + "</body>"),
                       encoding="utf-8")
    title = Dom(chromium(tmp, "--dump-dom", f"--window-size={width},{FIRST_SCREEN}", checked.as_uri()).stdout).title
    assert title.startswith("LAYOUT "), title
    found: dict[str, Any] = json.loads(title.removeprefix("LAYOUT "))
    return found


def test_the_layout_check_sees_clipped_text(tmp_path: Path) -> None:
    """The check can fail: a clipped cell, a label outside its chart, a table wider than the window."""
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><html><head><title>x</title></head><body><table class="decision"><tr>'
                    '<td style="max-width:40px;overflow:hidden;white-space:nowrap">0.20 (1,234 of 5,000)</td></tr>'
                    '</table><svg class="chart" viewBox="0 0 100 50" width="100" height="50"><text x="90" y="20">'
                    'a label running off the chart</text></svg><div style="width:3000px">wide</div></body></html>',
                    encoding="utf-8")
    problems = " | ".join(layout(tmp_path, page, 800)["problems"])
    assert "text overflows <td>: 0.20 (1,234" in problems
    assert "chart text outside its chart: a label running off" in problems
    assert "page wider than the window" in problems


@pytest.mark.parametrize("width", WIDTHS)
def test_first_screen_screenshots(report_kind: tuple[str, Path], width: int) -> None:
    """The first screen as a person sees it; LONGCTX_KEEP_SCREENSHOT=1 copies it to docs/img/ (the docs show it)."""
    kind, report = report_kind
    shot = report.with_name(f"report-{kind}-{width}.png")
    chromium(report.parent, f"--screenshot={shot}", f"--window-size={width},{FIRST_SCREEN}", "--hide-scrollbars",
             report.as_uri())
    rgb = decode_png(shot.read_bytes())[:, :, :3].astype(np.int64)
    assert rgb.shape[:2] == (FIRST_SCREEN, width)
    red = (rgb == (185, 28, 28)).all(axis=2).sum()  # the verdict box: red for a failing or all-error run
    assert (red > 20_000) == (kind in ("compared", "errors", "models")), (kind, red)
    if os.environ.get("LONGCTX_KEEP_SCREENSHOT") == "1":
        kept = REPO / "docs" / "img" / shot.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, kept)
