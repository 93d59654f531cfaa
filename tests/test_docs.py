"""The README as a front door and the docs' generated study tables (no mkdocs needed: CI builds the site itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "docs" / "studies"
RECORDS = sorted(p.parent for p in STUDIES.glob("*/analysis.json"))


def study_tables():
    return load_script("docs_study_tables")


def test_readme_is_short_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "bash scripts/install.sh && . .venv/bin/activate && glm53 run --out runs/main" in text
    test_command = "bash scripts/install.sh --dev --extras && . .venv/bin/activate && python -m pytest -q"
    assert test_command in text
    # CI's first step runs the line it reads from the README, exactly, before it installs anything else
    ci = (ROOT / ".ci" / "run").read_text()
    pattern = re.search(r"grep -m1 -E '([^']+)' README.md", ci).group(1)
    lines = [line for line in text.splitlines() if re.search(pattern, line)]
    assert lines[0] == test_command, lines
    first_run = ci.index('bash -c "set -euo pipefail; $readme_tests"')
    assert "bash scripts/install.sh" not in ci[:first_run]
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
    metric = analysis["metrics"][0]
    mean = analysis["arms"][baseline][analysis["checkpoints"][0]][metric]["mean"]
    assert tables.fmt(metric, mean) in row
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


def test_the_lifts_table_and_the_detectable_column_come_from_the_analysis(tmp_path):
    """An rl-splits study (lifts against zero, one comparison): every figure of both tables is the analysis's."""
    from glm53.sweep.analysis import analyze
    from glm53.sweep.runner import SPEC_FILE, job_dir
    from glm53.sweep.spec import SweepSpec

    spec = SweepSpec(name="lifted", description="", job="rl-splits", seeds=tuple(range(1, 9)), checkpoints=(),
                     metrics=("compose_lift", "compose_pass_at_1"), baseline="a", base={},
                     arms={"a": {}, "b": {"lr": 1.0}}, comparisons=(("b", "a"),))
    study = tmp_path / "lifted"
    study.mkdir()
    (study / SPEC_FILE).write_text(json.dumps(spec.to_dict()))
    for arm, extra in (("a", 0.0), ("b", 0.05)):
        for seed in spec.seeds:
            lift = 0.02 + 0.01 * (seed % 3) + extra
            folder = job_dir(study, arm, seed)
            folder.mkdir(parents=True)
            (folder / "receipt.json").write_text(json.dumps({"seed": seed, "metrics": {"eval": {
                "compose_lift": lift, "compose_pass_at_1": 0.3 + lift}}}))
    analysis = analyze(study, charts=False)
    tables = study_tables()
    lifts = tables.table(tmp_path, "lifted", "lifts", {}).splitlines()
    assert len(lifts) == 2 + 2  # a header, a rule, one row per arm
    row_b = next(r for r in analysis["lifts"] if r["arm"] == "b")
    assert lifts[3].startswith(f"| b | compose_lift | +{100 * row_b['mean']:.1f} pp |")
    assert f"8 / 0 of 8 | {row_b['p']:.4g} | {row_b['holm_p']:.4g} |" in lifts[3]
    comparisons = tables.table(tmp_path, "lifted", "comparisons", {"metrics": ["compose_pass_at_1"]}).splitlines()
    (c,) = [c for c in analysis["comparisons"] if c["metric"] == "compose_pass_at_1"]
    assert comparisons[0].endswith("smallest detectable (exact, Holm) |")
    assert comparisons[2].endswith(f"| {tables.detectable('compose_pass_at_1', c)} |")
    assert c["detectable"]["sign_flip"] is not None and tables.detectable("compose_pass_at_1", c).endswith(" pp")


def test_adjacent_markers_expand_to_separate_tables():
    tables = study_tables()
    record = RECORDS[0].name
    page = f"<!-- study-table {record} summary -->\n\n<!-- study-table {record} comparisons -->\n"
    out = tables.expand_markers(page, STUDIES)
    summary = tables.table(STUDIES, record, "summary", {})
    assert out.startswith(summary + "\n\n| checkpoint |")  # the blank line between them survives
