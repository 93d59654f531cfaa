"""The REPORT's pretraining-loss chart draws the validation loss (the log's rows and step 0's checkpoint record)
beside the training loss."""

import json

import glm53.report.charts as shared
import glm53.report.run_report as report


def test_the_loss_chart_draws_the_validation_loss(tmp_path, monkeypatch):
    (tmp_path / "pretrain").mkdir()
    val = {2: 5.25, 4: 5.0, 6: 4.75}
    curve = [{"step": s, "loss": 5.0 - s / 10, **({"val_loss": val[s]} if s in val else {})} for s in range(1, 7)]
    (tmp_path / "pretrain" / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in curve))
    pretrain_receipt = {"checkpoints": [{"step": 0, "dev_passed": 0, "dev_tasks": 1, "val_loss": 5.5},
                                        {"step": 6, "dev_passed": 1, "dev_tasks": 1, "val_loss": 4.75}]}
    rl_receipt = {"checkpoints": [], "steps": []}
    drawn = {}
    real_save = report._save

    def keep(fig, charts, name):
        drawn[name] = [(line.get_label(), list(line.get_xdata()), list(line.get_ydata()))
                       for line in fig.axes[0].get_lines()]
        return real_save(fig, charts, name)

    monkeypatch.setattr(report, "_save", keep)
    monkeypatch.setattr(shared, "save", keep)  # the loss chart is drawn by the code `glm53 report` shares
    written = report.training_charts(tmp_path, pretrain_receipt, rl_receipt)
    assert "charts/training_loss.png" in written and (tmp_path / "charts" / "training_loss.png").is_file()
    lines = {label: (x, y) for label, x, y in drawn["training_loss.png"]}
    assert lines["training"][0] == [1, 2, 3, 4, 5, 6]
    assert lines["validation (held out)"] == ([0, 2, 4, 6], [5.5, 5.25, 5.0, 4.75])
