"""The corpus lookup (data dir, $LONGCTX_DATA_DIR, cache, download) against a local HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_longctx.corpus.lookup import CorpusFile, CorpusNotFound, find_corpus, sha256_of
from pytest_longctx.experiments.qa.federal_register import PINNED, fr_issue, load_issue, locate

DATE = "2024-03-04"  # no pinned checksum: whatever the server sends is recorded
SECTION = "DEPARTMENT OF TRANSPORTATION " + "word " * 250 + "[FR Doc. 2024\u201304512 Filed 3\u20131\u201324]"
XML = f"<FEDREG><RULES><P>{SECTION}</P><P>BILLING CODE 4910-13-P</P><P>{'tail ' * 20}</P></RULES></FEDREG>"


class Words:
    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


class FileServer:
    """Serves ``files`` (path -> bytes) on 127.0.0.1 and counts the GET requests per path."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.hits: dict[str, int] = {}
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                body = outer.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FileServer]:
    with FileServer({f"/fr/FR-{DATE}.xml": XML.encode()}) as srv:
        monkeypatch.setenv("LONGCTX_FR_URL", srv.url + "/fr/FR-{date}.xml")
        yield srv


def closed_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_FR_URL", "http://127.0.0.1:9/FR-{date}.xml")  # nothing listens on port 9


def test_downloaded_once_into_the_cache_with_its_checksum(server: FileServer, tmp_path: Path) -> None:
    cache = tmp_path / "corpora"
    path = locate(DATE, path=None, data_dir=None, cache_dir=cache)
    assert path == cache / f"FR-{DATE}.xml" and path.read_bytes() == XML.encode()
    assert (cache / f"FR-{DATE}.xml.sha256").read_text() == sha256_of(path) + "\n"
    assert locate(DATE, path=None, data_dir=None, cache_dir=cache) == path
    assert server.hits == {f"/fr/FR-{DATE}.xml": 1}  # the second lookup is served by the cache
    issue = load_issue(path, DATE, Words(), cache)
    assert [s.id for s in issue.sections] == ["2024-04512"]


def test_corrupt_cached_file_is_downloaded_again(server: FileServer, tmp_path: Path) -> None:
    cache = tmp_path / "corpora"
    path = locate(DATE, path=None, data_dir=None, cache_dir=cache)
    path.write_bytes(XML.encode()[:40])  # a truncated copy
    assert locate(DATE, path=None, data_dir=None, cache_dir=cache) == path
    assert path.read_bytes() == XML.encode()
    assert server.hits == {f"/fr/FR-{DATE}.xml": 2}


def test_corrupt_cached_file_offline_is_reported_in_one_line(server: FileServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "corpora"
    locate(DATE, path=None, data_dir=None, cache_dir=cache).write_bytes(b"<FEDREG>")
    closed_port(monkeypatch)
    with pytest.raises(CorpusNotFound) as err:
        locate(DATE, path=None, data_dir=None, cache_dir=cache)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"Federal Register {DATE} not found")
    assert f"cached {cache / f'FR-{DATE}.xml'} is corrupt" in message and "127.0.0.1:9" in message


def test_pinned_issue_with_other_bytes_is_refused(server: FileServer, tmp_path: Path) -> None:
    pinned = "2024-02-12"
    assert pinned in PINNED
    server.files[f"/fr/FR-{pinned}.xml"] = XML.encode()  # not the issue the question set was written on
    with pytest.raises(CorpusNotFound) as err:
        locate(pinned, path=None, data_dir=None, cache_dir=tmp_path)
    assert "a different version of the file" in str(err.value) and PINNED[pinned][1][:12] in str(err.value)
    assert list(tmp_path.iterdir()) == []  # nothing cached


def test_pinned_issue_in_the_cache_is_checked_against_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed_port(monkeypatch)
    (tmp_path / "FR-2024-02-12.xml").write_text(XML)  # put by hand, but not the pinned bytes
    with pytest.raises(CorpusNotFound, match="is corrupt"):
        locate("2024-02-12", path=None, data_dir=None, cache_dir=tmp_path)


def test_offline_and_missing_on_the_server_are_one_line(server: FileServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CorpusNotFound) as err:
        locate("1999-01-04", path=None, data_dir=str(tmp_path / "nowhere"), cache_dir=tmp_path / "c")
    message = str(err.value)
    assert "\n" not in message and "Not Found" in message and "(no such folder)" in message
    assert "pass --longctx-data-dir DIR or set LONGCTX_DATA_DIR=DIR" in message
    closed_port(monkeypatch)
    with pytest.raises(CorpusNotFound) as err:
        locate(DATE, path=None, data_dir=None, cache_dir=tmp_path / "c")
    assert "\n" not in str(err.value) and "download from http://127.0.0.1:9/" in str(err.value)


@pytest.mark.parametrize("layout", ["FR-{d}.xml", "federal_register_{d}/FR-{d}.xml",
                                    "federal_register_{d}/current/FR-{d}.xml"])
def test_a_data_dir_is_a_corpus_folder_or_a_folder_of_corpora(layout: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    closed_port(monkeypatch)
    target = tmp_path / "data" / layout.format(d=DATE)
    target.parent.mkdir(parents=True)
    target.write_text(XML)
    assert locate(DATE, path=None, data_dir=str(tmp_path / "data"), cache_dir=tmp_path / "c") == target
    monkeypatch.setenv("LONGCTX_DATA_DIR", str(tmp_path / "data"))
    assert locate(DATE, path=None, data_dir=None, cache_dir=tmp_path / "c") == target


def test_option_beats_environment_beats_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed_port(monkeypatch)
    for folder in ("opt", "env", "cache"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"FR-{DATE}.xml").write_text(XML)
    monkeypatch.setenv("LONGCTX_DATA_DIR", str(tmp_path / "env"))
    assert locate(DATE, path=None, data_dir=str(tmp_path / "opt"), cache_dir=tmp_path / "cache").parent.name == "opt"
    assert locate(DATE, path=None, data_dir=None, cache_dir=tmp_path / "cache").parent.name == "env"
    monkeypatch.delenv("LONGCTX_DATA_DIR")
    assert locate(DATE, path=None, data_dir=None, cache_dir=tmp_path / "cache").parent.name == "cache"


def test_any_corpus_file_by_name(tmp_path: Path) -> None:
    """The lookup is general: the lost-in-the-middle files are found the same way (no download source)."""
    spec = CorpusFile(corpus="lost_in_the_middle", file="qa_data/nq-open-oracle.jsonl.gz", title="NQ-Open oracle")
    target = tmp_path / "corpora" / "lost_in_the_middle" / "qa_data" / "nq-open-oracle.jsonl.gz"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"x")
    assert find_corpus(spec, data_dir=str(tmp_path / "corpora"), cache_dir=tmp_path / "c") == target
    with pytest.raises(CorpusNotFound, match=r"^NQ-Open oracle not found .*no download source"):
        find_corpus(spec, data_dir=None, cache_dir=tmp_path / "c")


def test_fr_url_template_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGCTX_FR_URL", raising=False)
    assert fr_issue(DATE).url == f"https://www.govinfo.gov/content/pkg/FR-{DATE}/xml/FR-{DATE}.xml"
    assert fr_issue("2024-02-12").sha256 == PINNED["2024-02-12"][1]
    monkeypatch.setenv("LONGCTX_FR_URL", "http://mirror/{date}.xml")
    assert fr_issue(DATE).url == f"http://mirror/{DATE}.xml"


def test_a_test_needing_a_missing_corpus_skips_with_one_line(longctx_runner, monkeypatch) -> None:
    """What a fresh clone without ../shared and without network sees: one skip line per missing corpus."""
    closed_port(monkeypatch)
    longctx_runner.pytester.makeconftest('pytest_plugins = ["tests.corpus_data"]')
    longctx_runner.pytester.makepyfile(test_needs_fr="def test_it(fr_xml):\n    assert fr_xml.is_file()\n")
    run = longctx_runner.run("-rs", cache=True)
    run.result.assert_outcomes(skipped=1)
    (line,) = [x for x in run.result.stdout.lines if x.startswith("SKIPPED")]
    assert ("Federal Register 2024-02-12 not found (FR-2024-02-12.xml is not in $LONGCTX_DATA_DIR (not set), "
            "the cache ") in line
    assert "pass --longctx-data-dir DIR or set LONGCTX_DATA_DIR=DIR" in line
    assert line.endswith("(CI: LONGCTX_DATA_DIR=../shared/corpora)")



def test_a_data_dir_message_says_every_place_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LONGCTX_DATA_DIR=/empty``: the skip line names the folders looked in, not only what to set."""
    from pytest_longctx.corpus.missing import data_missing

    empty, option = tmp_path / "empty", tmp_path / "nowhere"
    empty.mkdir()
    monkeypatch.setenv("LONGCTX_DATA_DIR", str(empty))
    with pytest.raises(CorpusNotFound) as err:
        locate(DATE, path=None, data_dir=str(option), cache_dir=tmp_path / "c", download=False)
    looked = (f"--longctx-data-dir {option} (no such folder)", f"$LONGCTX_DATA_DIR={empty}",
              f"the cache {tmp_path / 'c'}")
    assert err.value.looked == looked and ", ".join(looked) in str(err.value)
    line = data_missing(("qa",), [fr_issue(DATE)], "qa", err.value.looked).line
    assert line.startswith(f"qa not run: Federal Register {DATE} (federal_register_{DATE}/FR-{DATE}.xml) not found in "
                           f"{looked[0]}, {looked[1]} or {looked[2]}; get it with `")
    monkeypatch.delenv("LONGCTX_DATA_DIR")
    with pytest.raises(CorpusNotFound) as err:
        locate(DATE, path=None, data_dir=None, cache_dir=tmp_path / "c", download=False)
    assert err.value.looked == ("$LONGCTX_DATA_DIR (not set)", f"the cache {tmp_path / 'c'}")
