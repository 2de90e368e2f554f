"""Paths to the shared corpora beside the project (CI and the team's machines have ../shared)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora"
FR_XML = SHARED / "federal_register_2024-02-12" / "current" / "FR-2024-02-12.xml"
QUESTIONS = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
