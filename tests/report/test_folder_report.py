"""`glm53 report RUN_DIR`: a pretrain, an rl and a sweep folder drawn; regenerated, never another folder
overwritten; a folder that is no run folder refused in one line."""

import json

import pytest

from glm53.cli import main

TINY_FLAGS = ["--dim", "32", "--layers", "2", "--heads", "4", "--expert-hidden", "48", "--experts", "4",
              "--max-sequence-length", "160", "--no-progress", "--device", "cpu", "--threads", "1"]


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
def test_a_pretrain_folder_gets_charts_a_summary_and_examples_and_is_regenerated(tmp_path, capsys):
    run = tmp_path / "pre"
    assert main(["pretrain", "--out", str(run), "--steps", "3", "--checkpoints", "3", "--batch-size", "2",
                 "--sequence-length", "128", "--dev-max-new-tokens", "4", "--eval-every", "1", *TINY_FLAGS]) == 0
    assert main(["report", str(run)]) == 0
    report = (run / "report" / "REPORT.md").read_text()
    charts = {p.name for p in (run / "report" / "charts").iterdir()}
    assert {"pre_loss.png", "pre_lr.png", "pre_grad_norm.png", "pre_tokens_per_second.png"} <= charts
    assert "| final_loss |" in report and "Dev completions at step 3" in report
    assert all(f"charts/{name}" in report for name in charts)
    assert main(["report", str(run)]) == 0  # derived: regenerated in place
    assert (run / "report" / "REPORT.md").read_text() == report


def test_an_rl_and_a_sweep_folder(tmp_path):
    rl = tmp_path / "rl"
    jsonl(rl / "rl_log.jsonl", [{"step": i, "groups_done": 2 * i, "reward_mean": 0.1 * i, "zero_variance_fraction": 0.5,
                                 "loss": 0.3, "grad_norm": 1.0} for i in range(1, 4)])
    jsonl(rl / "rollouts.jsonl", [{"task_id": "t1", "completion": "x + 1", "reward": 1.0,
                                   "verdict": {"status": "passed"}}])
    (rl / "training-receipt.json").write_text(json.dumps({"status": "completed", "checkpoints": [
        {"group": 2, "dev": {"exact_rollouts": 1, "rollouts": 4}}]}))
    assert main(["report", str(rl), "--out", str(tmp_path / "rl-report")]) == 0
    text = (tmp_path / "rl-report" / "REPORT.md").read_text()
    assert "charts/rl_reward.png" in text and "charts/rl_dev.png" in text and "| t1 | passed | 1 |" in text
    sweep = tmp_path / "sweep"
    jsonl(sweep / "sweep-log.jsonl", [{"job": "a/seed-1", "status": "done", "seconds": 2.5}])
    jsonl(sweep / "runs" / "a" / "seed-1" / "train_log.jsonl", [{"step": s, "loss": 3.0 / s} for s in (1, 2)])
    assert main(["report", str(sweep)]) == 0
    text = (sweep / "report" / "REPORT.md").read_text()
    assert "charts/sweep_loss.png" in text and "| a/seed-1 | done | 2.5 |" in text
    # the sweeps as they are written: a pretraining job's log under run/, an expression-data job's curve in its receipt
    real = tmp_path / "real-sweep"
    jsonl(real / "sweep-log.jsonl", [{"job": "a/seed-1", "status": "done", "seconds": 1.0}])
    jsonl(real / "runs" / "a" / "seed-1" / "run" / "train_log.jsonl", [{"step": s, "loss": 3.0 / s} for s in (1, 2)])
    (real / "runs" / "b" / "seed-1").mkdir(parents=True)
    (real / "runs" / "b" / "seed-1" / "receipt.json").write_text('{"loss_curve": [5.5, 5.4, 5.2]}')
    from glm53.report import folder_report

    drawn = []
    draw_chart = folder_report.draw.line_chart
    folder_report.draw.line_chart = lambda *args, **kw: drawn.append(args[5]) or draw_chart(*args, **kw)
    try:
        (tmp_path / "charts").mkdir()
        folder_report._sweep_section(real, tmp_path / "charts")
    finally:
        folder_report.draw.line_chart = draw_chart
    assert [(name, steps) for name, steps, _ in drawn[0]] == [("a/seed-1", [1, 2]), ("b/seed-1", [1, 2, 3])]


def test_refusals_are_one_line_and_write_nothing(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    assert main(["report", str(tmp_path / "plain")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a glm53 run folder" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "plain" / "report").exists()
    rl = tmp_path / "rl"
    jsonl(rl / "rl_log.jsonl", [{"step": 1, "groups_done": 2, "reward_mean": 0.0, "zero_variance_fraction": 1.0}])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["report", str(rl), "--out", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a report this command wrote" in err and len(err.splitlines()) == 1
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
