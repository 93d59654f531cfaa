"""Untrusted text (model completions, task prompts, held-out corpus text) in the Markdown reports: written as code
whatever it holds, so the rendered HTML (Python-Markdown, as `glm53 serve` renders REPORT.md) holds no live tag and
shows the text itself."""

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from glm53.report.charts import table
from glm53.report.escape import NEWLINE_MARK, code_block, code_span

HOSTILE = ["a`b", "``x``", "`", "a | b", "line1\nline2\r\nline3", "<img src=x onerror=alert(1)>",
           "<script>alert(1)</script>", "` <img src=x onerror=alert(1)> `", "x` | <img src=y onerror=alert(2)> |",
           "```\n<script>alert(1)</script>\n```", "x\\|y", "trail\\", "**bold** [link](javascript:alert(1))",
           "&lt;img src=x onerror=alert(1)&gt;"]


class Tags(HTMLParser):
    """The start tags of rendered HTML and the text of each <code> element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.codes, self._code = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "code":
            self._code = []

    def handle_endtag(self, tag):
        if tag == "code" and self._code is not None:
            self.codes.append("".join(self._code))
            self._code = None

    def handle_data(self, data):
        if self._code is not None:
            self._code.append(data)


def rendered(text: str) -> Tags:
    parser = Tags()
    # as glm53 serve renders REPORT.md: Python-Markdown comes with the serve extra, so the render checks skip without it
    markdown = pytest.importorskip("markdown", reason="the serve extra is not installed (bash scripts/install.sh "
                                                      "--serve)")
    parser.feed(markdown.markdown(text, extensions=["tables", "fenced_code"]))
    return parser


def assert_no_live_tag(parsed: Tags, allowed=("table", "thead", "tbody", "tr", "th", "td", "code", "pre", "p", "h1",
                                              "h2", "h3", "strong", "img", "ul", "li")):
    for tag, attrs in parsed.tags:
        assert tag in allowed, (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert tag != "img" or attrs.get("src", "").startswith("charts/"), attrs  # the report's own charts only
        assert not any("javascript:" in str(value) for value in attrs.values()), (tag, attrs)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_span_in_a_table_cell_shows_the_text_and_nothing_live(text):
    cell = code_span(text)
    assert "\n" not in cell and "\r" not in cell
    parsed = rendered("\n".join(table(["task", "completion"], [["t1", cell]])))
    assert_no_live_tag(parsed)
    # one row of two cells: nothing in the text split the row or ended the span
    assert [t for t, _ in parsed.tags].count("td") == 2 and len(parsed.codes) == 1
    shown = text.replace("\r\n", "\n").replace("\n", NEWLINE_MARK).replace("|", "\\|")  # Python-Markdown keeps \|
    assert parsed.codes[0] == shown.strip()


@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_block_holds_the_text_whole(text):
    parsed = rendered("\n".join(["## example", "", *code_block(text, "python"), "", "after"]))
    assert_no_live_tag(parsed)
    assert parsed.codes == [text.replace("\r\n", "\n") + "\n"]


def test_plain_table_cells_have_html_escaped():
    parsed = rendered("\n".join(table(["figure", "value"], [["<script>alert(1)</script>", "<img src=x onerror=a()>"]])))
    assert_no_live_tag(parsed)


def _suite(completion: str) -> dict:
    return {"task_id": "confirm-increment-000", "family": "increment", "passed": 0, "prompt": "def f(x):\n",
            "samples": [{"completion": completion, "verdict": {"status": "failed"}}]}


def test_the_main_jobs_report_escapes_completions(tmp_path):
    from glm53.report.run_report import write_report

    families = {"increment": {"tasks_solved_any": 0, "tasks": len(HOSTILE)}}
    before = {"by_family": families, "summary": {"tasks_solved_any": 0, "tasks": len(HOSTILE)},
              "tasks": [{**_suite("return x"), "task_id": f"t{i}"} for i in range(len(HOSTILE))]}
    after = {**before, "tasks": [{**_suite(text), "task_id": f"t{i}"} for i, text in enumerate(HOSTILE)]}
    overall = {"tasks": len(HOSTILE), "gains": 0, "losses": 0, "mcnemar_p": 1.0, "mean_difference": 0.0,
               "bootstrap_95": [0.0, 0.0]}
    info = {"rl_families": ["increment"], "seed": 1, "preset": "quick", "device": "cpu", "seconds": {"total": 1.0},
            "selected_rl_group": 2}
    text = write_report(tmp_path, info, before, after, {"comparisons": [{"overall": overall}]}, [])
    parsed = rendered(text)
    assert_no_live_tag(parsed)
    for completion in HOSTILE[:10]:  # each of the ten examples whole in its own span, none split
        shown = completion.strip().replace("\r\n", "\n").replace("\n", NEWLINE_MARK).replace("|", "\\|")
        assert shown.strip() in parsed.codes
    assert [t for t, _ in parsed.tags].count("td") == 4 * 4 + 10 * 3  # the family table (4 rows), the examples


def test_the_suite_report_fences_prompts_and_completions(tmp_path):
    from glm53.report.run_suite_report import write_suite_report

    results = {}
    for i, text in enumerate(HOSTILE[:4] + HOSTILE[5:7] + HOSTILE[9:10]):
        task = {**_suite("return x"), "prompt": text}
        overall = {"tasks": 1, "solved_a": 0, "solved_b": 0, "gains": 0, "losses": 0, "mcnemar_p": 1.0,
                   "mean_difference": 0.0, "bootstrap_95": [0.0, 0.0]}
        summary = {"token_cap_hits": 0, "valid_programs": 1}
        results[f"split{i}"] = ({"tasks": [task], "summary": summary},
                                {"tasks": [{**task, "samples": [{"completion": text,
                                                                "verdict": {"status": "failed"}}]}],
                                 "summary": summary}, {"comparisons": [{"overall": overall}]})
    info = {"suite": "broad", "seed": 1, "preset": "broad", "device": "cpu", "language": "python",
            "seconds": {"total": 1.0}, "rl_start": "pretrain/checkpoint-0003", "selected_rl_group": 2, "rl_tasks": 1}
    text = write_suite_report(tmp_path, info, results, [])
    parsed = rendered(text)
    assert_no_live_tag(parsed)
    for split, (before, after, _) in results.items():
        prompt, completion = before["tasks"][0]["prompt"], after["tasks"][0]["samples"][0]["completion"]
        assert prompt.replace("\r\n", "\n") + "\n" in parsed.codes
        assert completion.replace("\r\n", "\n") + "\n" in parsed.codes


def jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_glm53_report_escapes_held_out_corpus_text_and_rollouts(tmp_path):
    from glm53.cli import main

    run = tmp_path / "pre"
    jsonl(run / "train_log.jsonl", [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}])
    samples = [{"prompt": text, "completion": HOSTILE[8 + i]} for i, text in enumerate(HOSTILE[4:8])]  # 4 shown
    (run / "training-receipt.json").write_text(json.dumps({"status": "completed", "checkpoints": [
        {"step": 2, "corpus_samples": samples, "val_loss": 1.0}]}))
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    parsed = rendered((tmp_path / "report" / "REPORT.md").read_text())
    assert_no_live_tag(parsed)
    assert repr("<img src=x onerror=alert(1)>") in parsed.codes

    rl = tmp_path / "rl"
    jsonl(rl / "rl_log.jsonl", [{"step": 1, "groups_done": 2, "reward_mean": 0.1, "zero_variance_fraction": 0.5}])
    jsonl(rl / "rollouts.jsonl", [{"task_id": "<img src=x onerror=alert(3)>", "completion": text, "reward": 1.0,
                                   "verdict": {"status": "passed"}} for text in HOSTILE[4:8]])
    (rl / "training-receipt.json").write_text(json.dumps({"status": "completed", "checkpoints": []}))
    assert main(["report", str(rl), "--out", str(tmp_path / "rl-report")]) == 0
    parsed = rendered((tmp_path / "rl-report" / "REPORT.md").read_text())
    assert_no_live_tag(parsed)
    assert {repr(text) for text in HOSTILE[4:8]} <= set(parsed.codes)
