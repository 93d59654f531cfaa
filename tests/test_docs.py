"""The README as a front door and the docs' generated study tables (no mkdocs needed: CI builds the site itself)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "docs" / "studies"
RECORDS = sorted(p.parent for p in STUDIES.glob("*/analysis.json"))


def study_tables():
    spec = importlib.util.spec_from_file_location("docs_study_tables", ROOT / "scripts" / "docs_study_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_short_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "bash scripts/install.sh && . .venv/bin/activate && glm53 run --out runs/main" in text
    test_command = "bash scripts/install.sh --dev --extras && . .venv/bin/activate && python -m pytest -q"
    assert test_command in text
    ci = (ROOT / ".ci" / "run").read_text()  # CI runs the README's test command, step by step
    for step in test_command.split(" && "):
        assert step in ci
    assert "/work/" not in text and not re.search(r"\bissue \d", text)


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)]+)\)", text) if "://" not in link]
    assert links
    for link in links:
        assert (ROOT / link).exists(), link


@pytest.mark.parametrize("record", RECORDS, ids=[r.name for r in RECORDS])
def test_study_tables_come_from_the_record(record):
    tables = study_tables()
    analysis = json.loads((record / "analysis.json").read_text())
    summary = tables.table(STUDIES, record.name, "summary", {})
    baseline = analysis["baseline"]
    row = next(line for line in summary.splitlines() if line.startswith(f"| {baseline} |"))
    loss = analysis["arms"][baseline][analysis["checkpoints"][0]]["train_loss"]["mean"]
    assert f"{loss:.4f}" in row
    comparisons = tables.table(STUDIES, record.name, "comparisons", {})
    assert len(comparisons.splitlines()) == 2 + sum(1 for c in analysis["comparisons"] if c["n"])


def test_every_marker_on_a_page_expands():
    tables = study_tables()
    pages = list((ROOT / "docs").rglob("*.md"))
    marked = [p for p in pages if "<!-- study-table" in p.read_text()]
    assert marked, "no study page uses a generated table"
    for page in marked:
        out = tables.expand_markers(page.read_text(), STUDIES)
        outside_code = re.sub(r"^```.*?^```", "", out, flags=re.MULTILINE | re.DOTALL)
        assert "<!-- study-table" not in outside_code, page


def test_the_released_attention_table_matches_its_run():
    if not (STUDIES / "released-attention" / "analysis.json").is_file():
        pytest.skip("record not kept")
    summary = study_tables().table(STUDIES, "released-attention", "summary", {"columns": [
        "parameters", "train_loss@100", "greedy_pass_at_1@100"]})
    assert "| reference | 25,730,592 | 0.2949 | 95.3% (56, 64, 63 of 64) |" in summary
