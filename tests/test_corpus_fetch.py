"""``longctx-data``: corpora fetched ahead of a run (resumable, verified, with progress) from a local HTTP server."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_longctx.corpus.fetch import corpus_sets, files_of, main
from pytest_longctx.corpus.lookup import CorpusFile, download_file
from pytest_longctx.corpus.missing import data_missing
from pytest_longctx.errors import UsageError

DATE = "2024-03-04"  # no pinned checksum: whatever the server sends is recorded
BODY = bytes(range(256)) * 400  # 102,400 bytes


class RangeServer:
    """Serves ``BODY`` at every path, honouring ``Range: bytes=N-``; ``cut`` makes the next answer stop after that
    many bytes (a dropped connection). Records the Range header of every request."""

    def __init__(self) -> None:
        self.ranges: list[str | None] = []
        self.cut: int | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked = self.headers.get("Range")
                outer.ranges.append(asked)
                start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
                body = BODY[start:]
                self.send_response(206 if asked else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut, outer.cut = outer.cut, None
                self.wfile.write(body if cut is None else body[:cut])

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RangeServer]:
    srv = RangeServer()
    srv.thread.start()
    monkeypatch.setenv("LONGCTX_FR_URL", srv.url + "/FR-{date}.xml")
    monkeypatch.delenv("LONGCTX_DATA_DIR", raising=False)
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
        srv.thread.join()


def test_an_interrupted_download_resumes_where_it_stopped(server: RangeServer, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    server.cut = 30_000
    assert main(["fetch", f"qa:{DATE}", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    part = tmp_path / f"federal_register_{DATE}" / f"FR-{DATE}.xml.part"
    assert out.startswith(f"FAIL  federal_register_{DATE}/FR-{DATE}.xml: download from ") and "kept in" in out
    assert part.stat().st_size == 30_000
    assert main(["fetch", f"qa:{DATE}", "--dir", str(tmp_path)]) == 0
    target = part.with_name(f"FR-{DATE}.xml")
    assert server.ranges == [None, "bytes=30000-"] and target.read_bytes() == BODY and not part.exists()
    assert target.with_name(target.name + ".sha256").read_text() == hashlib.sha256(BODY).hexdigest() + "\n"
    assert capsys.readouterr().out.startswith(f"got   federal_register_{DATE}/FR-{DATE}.xml: {target} (102,400 bytes")
    assert main(["fetch", f"qa:{DATE}", "--dir", str(tmp_path)]) == 0  # already here: verified, not fetched
    assert len(server.ranges) == 2 and capsys.readouterr().out.startswith("ok    ")
    assert main(["list", f"qa:{DATE}", "--dir", str(tmp_path)]) == 0


def test_a_file_that_is_not_the_pinned_one_is_refused_and_deleted(server: RangeServer, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch", "qa", "--dir", str(tmp_path)]) == 1  # 2024-02-12 is pinned; the server sends other bytes
    out = capsys.readouterr()
    assert "FAIL  federal_register_2024-02-12/FR-2024-02-12.xml:" in out.out and "a different version" in out.out
    assert "1 of 1 files missing or bad" in out.err
    assert not list(tmp_path.rglob("FR-2024-02-12.xml*"))


def test_progress_is_reported_as_bytes_arrive(server: RangeServer, tmp_path: Path) -> None:
    seen: list[tuple[int, int | None]] = []
    spec = CorpusFile("c", "f.bin", "a file", url=server.url + "/f.bin", sha256=hashlib.sha256(BODY).hexdigest())
    download_file(spec, tmp_path / "f.bin", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(BODY), len(BODY)) and len(seen) > 1 and all(t == len(BODY) for _, t in seen)


def test_corpus_sets_come_from_entry_points_and_list_says_what_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("LONGCTX_DATA_DIR", raising=False)
    assert {"qa", "litm"} <= set(corpus_sets())
    assert [f.where for f in files_of("qa")] == ["federal_register_2024-02-12/FR-2024-02-12.xml"]
    assert len(files_of("litm")) == 3 and all(f.sha256 for f in files_of("litm"))
    with pytest.raises(UsageError, match="unknown corpus set 'nope'; known: "):
        files_of("nope")
    assert main(["list", "--dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("MISS  ") for line in lines)
    assert main(["fetch", "qa:2024-02-31"]) == 2
    assert "qa:DATE: '2024-02-31' is not a calendar date" in capsys.readouterr().err


def test_the_skip_line_names_the_command_that_provides_the_data() -> None:
    spec = CorpusFile("federal_register_2024-02-12", "FR-2024-02-12.xml", "Federal Register 2024-02-12")
    skip = data_missing(("qa", "qa-control"), [spec], "qa")
    assert "\n" not in skip.line and skip.line.startswith(
        "qa, qa-control not run: Federal Register 2024-02-12 (federal_register_2024-02-12/FR-2024-02-12.xml) "
        "not found; get it with `")
    assert "longctx-data fetch qa`, or set LONGCTX_DATA_DIR to a folder of corpora holding it" in skip.line
    assert skip.to_json()["experiments"] == ["qa", "qa-control"] and str(skip.msg) == skip.line
