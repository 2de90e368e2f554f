"""The QA file: generation through a model, review statuses, edits, regeneration, staleness, CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.fake import FakeBackend
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs.__main__ import main
from pytest_longctx.experiments.docs.documents import Document, doc_sha, load_documents
from pytest_longctx.experiments.docs.generate import generate_for_doc
from pytest_longctx.experiments.docs.qa_file import QAItem, load_qa, qa_path, save_qa, usable_items

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "docs"
THREE = ["harbor-lane-sourdough.md", "meeting-2024-03-14.txt", "tollerton-mill-history.md"]


class ScriptedBackend:
    """Replies from a list, in order; remembers the requests."""

    provider = "scripted"
    model = "script"
    context_window = 8192
    tokenizer = "words"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        return Completion(text=self.replies.pop(0))

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in THREE:
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "picture.png").write_bytes(b"\x89PNG")
    return tmp_path


def items_by_id(folder: Path) -> dict[str, QAItem]:
    return {it.id: it for it in load_qa(qa_path(folder))}


def doc(text: str = "The mill was built in 1787 by Josiah Penhallow.") -> Document:
    return Document("mill.md", text, doc_sha(text))


def test_doc_sha_ignores_line_endings_and_trailing_blanks() -> None:
    assert doc_sha("a\r\nb  \n\n") == doc_sha("a\nb") != doc_sha("a\nc")


def test_generation_repairs_an_unusable_reply_once() -> None:
    backend = ScriptedBackend(["Sorry, here you go: (none)",
                               '```json\n[{"question": "Who built the mill?", "answer": "Josiah Penhallow"},]\n```'])
    result = asyncio.run(generate_for_doc(ModelClient(backend, None), doc(), 2))
    assert result.error is None and result.pairs == [("Who built the mill?", "Josiah Penhallow")]
    repair = backend.requests[1]
    assert [m.role for m in repair.messages] == ["user", "assistant", "user"]
    assert "no JSON found" in repair.messages[2].content


def test_generation_failure_is_reported_per_document() -> None:
    backend = ScriptedBackend(["I cannot help with that.", "Still no."])
    result = asyncio.run(generate_for_doc(ModelClient(backend, None), doc(), 2, retries=1))
    assert result.pairs == [] and result.raw == "Still no."
    assert result.error == "no JSON found in the reply (after 2 attempts)"


@pytest.mark.parametrize("name", ["perfect", "random", "wrong"])
def test_generation_through_the_fake_backend(name: str) -> None:
    client = ModelClient(FakeBackend(name), None)
    results = [asyncio.run(generate_for_doc(client, d, 2)) for d in load_documents(FIXTURES)]
    usable = [r for r in results if r.error is None]
    assert all(r.pairs for r in usable)
    if name == "perfect":
        assert len(usable) == len(results) and all(len(r.pairs) == 2 for r in results)
        assert all(a in r.doc.text for r in results for _, a in r.pairs)
    else:  # malformed but readable replies still parse; a refusal twice in a row is a reported failure
        assert len(usable) >= len(results) // 2
        assert all(r.error.startswith("no JSON found") for r in results if r.error is not None)


def test_review_round_trip(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "picture.png" in out
    items = items_by_id(folder)
    assert len(items) == 6 and {it.status for it in items.values()} == {"pending"}
    assert all(it.generated_by == "fake/perfect (docs-qa-generate@1)" and it.doc_sha for it in items.values())
    line = qa_path(folder).read_text().splitlines()[0]
    assert list(json.loads(line)) == ["id", "doc", "doc_sha", "status", "question", "answer", "note", "generated_by"]

    assert main(["review", str(folder), "--approve", "harbor-lane-sourdough/1", "meeting-2024-03-14/1",
                 "tollerton-mill-history/1", "--reject", "tollerton-mill-history/2"]) == 0
    # A person edits an approved item's answer and a pending item's question by hand.
    edited = []
    for raw in qa_path(folder).read_text().splitlines():
        obj = json.loads(raw)
        if obj["id"] == "harbor-lane-sourdough/1":
            obj["answer"] = "900 grams"
        if obj["id"] == "meeting-2024-03-14/2":
            obj["question"] = "Who is the treasurer of the Millbrook Community Garden committee?"
        edited.append(json.dumps(obj))
    qa_path(folder).write_text("\n".join(edited) + "\n")
    # The meeting summary changes; the mill history gets a new document beside it.
    meeting = folder / "meeting-2024-03-14.txt"
    meeting.write_text("Amended on 2 April 2024: 14 members attended.\n" + meeting.read_text())
    shutil.copy(FIXTURES / "skerrow-rock-log.txt", folder / "skerrow-rock-log.txt")

    capsys.readouterr()
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "meeting-2024-03-14/1: meeting-2024-03-14.txt changed since it was approved; now stale" in out
    items = items_by_id(folder)
    assert items["harbor-lane-sourdough/1"].status == "approved"
    assert items["harbor-lane-sourdough/1"].answer == "900 grams"  # the edit is kept
    assert items["tollerton-mill-history/1"].status == "approved"
    assert items["tollerton-mill-history/2"].status == "rejected"
    assert items["meeting-2024-03-14/1"].status == "stale"
    assert items["meeting-2024-03-14/1"].note.startswith("stale: meeting-2024-03-14.txt changed")
    assert items["meeting-2024-03-14/2"].status == "stale"
    assert items["meeting-2024-03-14/2"].question.startswith("Who is the treasurer")
    new_meeting = [it for it in items.values() if it.doc == "meeting-2024-03-14.txt" and it.status == "pending"]
    assert len(new_meeting) == 2 and all(it.doc_sha == doc_sha(meeting.read_text()) for it in new_meeting)
    assert sorted(i for i, it in items.items() if it.doc == "skerrow-rock-log.txt") == [
        "skerrow-rock-log/1", "skerrow-rock-log/2"]
    # Unchanged documents with reviewed or pending items get nothing new: 6 old + 2 new + 2 for the new document.
    assert len(items) == 10

    # Only approved items are used when review is required; stale ones never are.
    docs = {d.name: d for d in load_documents(folder)}
    required = usable_items(items.values(), docs, "required")
    assert [it.id for it in required] == ["harbor-lane-sourdough/1", "tollerton-mill-history/1"]
    optional = {it.id for it in usable_items(items.values(), docs, "optional")}
    assert optional == {"harbor-lane-sourdough/1", "harbor-lane-sourdough/2", "tollerton-mill-history/1",
                        "skerrow-rock-log/1", "skerrow-rock-log/2", *(it.id for it in new_meeting)}

    # Re-approving a stale item pins it to the new text.
    assert main(["review", str(folder), "--approve", "meeting-2024-03-14/1", "--status", "approved"]) == 0
    again = items_by_id(folder)["meeting-2024-03-14/1"]
    assert again.status == "approved" and again.doc_sha == doc_sha(meeting.read_text()) and again.note == ""
    out = capsys.readouterr().out
    assert "[approved] meeting-2024-03-14/1" in out and "[pending]" not in out
    assert main(["review", str(folder), "--approve-all"]) == 0
    assert "updated 5 item(s)" in capsys.readouterr().out  # the pending ones; stale ones need an id
    counts = [it.status for it in items_by_id(folder).values()]
    assert counts.count("stale") == 1 and counts.count("rejected") == 1 and counts.count("pending") == 0


def test_generate_reports_failed_documents_and_exits_1(folder: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_longctx.experiments.docs.generate as generate

    monkeypatch.setattr(generate, "fake_oracle", lambda doc, n: generate.Oracle("no JSON at all", ()))
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert out.count("FAILED ") == 3
    assert ("FAILED harbor-lane-sourdough.md: no JSON found in the reply (after 2 attempts); "
            "reply began: 'no JSON at all'") in out
    assert "3 document(s) failed" in out


@pytest.mark.parametrize("line, message", [
    ("{not json", "longctx-qa.jsonl:2: invalid JSON"),
    ('{"doc": "a.md", "question": "Q?"}', "longctx-qa.jsonl:2: missing field(s) answer"),
    ('{"doc": "a.md", "question": "Q?", "answer": "A", "status": "ok"}', "status 'ok' is not one of"),
    ('{"id": "a/1", "doc": "a.md", "question": "Q2?", "answer": "A"}', "duplicate id 'a/1' (also line 1)"),
    ('["a.md", "Q?", "A"]', "expected a JSON object"),
])
def test_bad_qa_lines_are_one_line_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "longctx-qa.jsonl"
    path.write_text('{"id": "a/1", "doc": "a.md", "question": "Q?", "answer": "A"}\n' + line + "\n")
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        load_qa(path)
    assert "\n" not in str(info.value)


def test_hand_written_items_get_ids_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "longctx-qa.jsonl"
    path.write_text('{"doc": "notes/a.md", "question": "Q?", "answer": 42}\n'
                    '{"id": "notes/a/7", "doc": "notes/a.md", "question": "R?", "answer": "B", "aliases": ["b"]}\n')
    items = load_qa(path)
    assert [(it.id, it.status, it.answer, it.generated_by) for it in items] == [
        ("notes/a/8", "pending", "42", "human"), ("notes/a/7", "pending", "B", "human")]
    assert items[1].golds == ("B", "b")
    save_qa(path, items)
    assert [it.id for it in load_qa(path)] == ["notes/a/7", "notes/a/8"]


def test_cli_bad_input_is_one_line_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    (tmp_path / "a.md").write_text("Some text about something.")
    assert main(["review", str(tmp_path)]) == 2
    assert "no QA items" in capsys.readouterr().err
    (tmp_path / "longctx-qa.jsonl").write_text("oops\n")
    assert main(["review", str(tmp_path)]) == 2
    assert "longctx-qa.jsonl:1: invalid JSON" in capsys.readouterr().err
    assert main(["generate", str(tmp_path), "--model", "nobody/x"]) == 2
    assert "unknown provider 'nobody'" in capsys.readouterr().err
    (tmp_path / "b.txt").write_bytes(b"\xff\xfe bad bytes")
    (tmp_path / "longctx-qa.jsonl").write_text("")
    assert main(["review", str(tmp_path)]) == 2
    assert "b.txt: not UTF-8 text" in capsys.readouterr().err


def test_fixture_qa_file_is_reviewed_and_unambiguous() -> None:
    from pytest_longctx.experiments.docs.scorers import normalize_answer

    docs = {d.name: d for d in load_documents(FIXTURES)}
    items = load_qa(qa_path(FIXTURES))
    assert 12 <= len(docs) <= 16
    assert all(150 <= len(d.text.split()) <= 600 for d in docs.values())
    assert {n.rsplit(".", 1)[1] for n in docs} == {"md", "txt"}
    assert usable_items(items, docs, "required") == sorted(items, key=lambda it: it.id)
    assert sorted(it.doc for it in items) == sorted(list(docs) * 10)
    for item in items:  # each gold answer occurs verbatim in its own document and in no other
        gold = f" {normalize_answer(item.answer)} "
        assert [n for n, d in docs.items() if gold in f" {normalize_answer(d.text)} "] == [item.doc], item.id
        assert len(item.answer.split()) <= 6


def test_items_without_their_document_are_missing_and_unused() -> None:
    from pytest_longctx.experiments.docs.qa_file import effective_status, status_counts

    mill = doc()
    items = [QAItem("mill/1", "mill.md", "Who built the mill?", "Josiah Penhallow", mill.sha, "approved"),
             QAItem("gone/1", "gone.md", "What was here?", "Nothing", "abc", "approved"),
             QAItem("mill/2", "mill.md", "When?", "1787", "", "approved")]  # hand-written, not pinned yet
    docs = {"mill.md": mill}
    assert [effective_status(it, docs) for it in items] == ["approved", "missing", "approved"]
    assert status_counts(items, docs) == {"approved": 2, "missing": 1}
    assert [it.id for it in usable_items(items, docs, "required")] == ["mill/1", "mill/2"]


def test_review_pins_hand_written_items_to_the_current_text(tmp_path: Path) -> None:
    (tmp_path / "mill.md").write_text("The mill was built in 1787 by Josiah Penhallow.")
    (tmp_path / "longctx-qa.jsonl").write_text(
        '{"doc": "mill.md", "question": "Who built the mill?", "answer": "Josiah Penhallow", "status": "approved"}\n')
    assert main(["review", str(tmp_path)]) == 0
    item = load_qa(tmp_path / "longctx-qa.jsonl")[0]
    assert (item.id, item.status, item.doc_sha) == ("mill/1", "approved", doc_sha((tmp_path / "mill.md").read_text()))


def test_generate_with_the_source_protocol_asks_one_pair_per_document(folder: Path) -> None:
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache", "--protocol", "source"]) == 0
    items = list(items_by_id(folder).values())
    assert len(items) == len({it.doc for it in items}) >= 2
    assert all(it.generated_by == "fake/perfect (docs-source-generate@1)" for it in items)
