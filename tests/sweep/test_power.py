"""Power figures (glm53/evaluate/power.py) against brute force, in `glm53 analyze`, and `glm53 sweep --plan`."""

import itertools
from dataclasses import replace
import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from glm53.cli import main
from glm53.evaluate.power import (bootstrap_mde, design_like, detectable_effects, exact_floor_seeds, seeds_needed,
                                  sign_flip_mde)
from glm53.evaluate.stats import bootstrap_interval, holm, sign_flip_test
from glm53.sweep.analysis import analyze
from glm53.sweep.runner import run_sweep
from glm53.sweep.spec import load_spec
from glm53.sweep.wording import detectable_text, magnitude

from .test_sweep import RL_EVAL_SPEC, TINY_MODEL, write_spec


def brute_force_p(x: np.ndarray) -> float:
    """The two-sided sign-flip p of x by listing every sign vector."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=len(x))))
    return float(np.mean(np.abs(signs @ x) / len(x) >= abs(x.mean()) - 1e-12))


def brute_force_mde(c: np.ndarray, threshold: float, direction: float, grid: np.ndarray) -> float | None:
    """The smallest grid shift at which the brute-force p is <= threshold (None: none on the grid)."""
    for delta in grid:
        if brute_force_p(c + direction * delta) <= threshold:
            return float(delta)
    return None


DESIGNS = [(n, m, alpha, draw) for n in range(3, 8) for m in range(1, 5) for alpha in (0.05, 0.5) for draw in (0, 1)]


@pytest.mark.parametrize("n,m,alpha,draw", DESIGNS)
def test_sign_flip_mde_equals_a_brute_force_scan(n, m, alpha, draw):
    d = np.random.default_rng(100 * n + 10 * m + draw).normal(0.2, 1.0, size=n).round(3)
    c = d - d.mean()
    threshold = alpha / m
    result = sign_flip_mde(d, alpha, m)
    assert result["method"] == "exact" and result["threshold"] == threshold
    step = np.abs(c).sum() / 2 / 600  # every step of p lies below sum|c| / 2
    grid = np.arange(0, np.abs(c).sum() / 2 + 3 * step, step)
    for key, direction in (("positive", 1.0), ("negative", -1.0)):
        scanned = brute_force_mde(c, threshold, direction, grid)
        ours = result[key]
        if 2 / 2 ** n > threshold:  # even the two constant sign vectors are too many
            assert ours is None and scanned is None and result["mde"] is None
            continue
        assert ours is not None and scanned is not None
        assert ours <= scanned + 1e-9 and scanned - ours <= step + 1e-9  # the exact step, within one grid step
        assert brute_force_p(c + direction * ours) <= threshold
        assert brute_force_p(c + direction * (ours - 1e-6)) > threshold or ours < 1e-6
        assert sign_flip_test(c + direction * ours)["p"] <= threshold  # and the analysis' own test agrees
    if result["mde"] is not None:
        assert result["mde"] == max(result["positive"], result["negative"])
        # the observed difference is a shift of its centered self: rejected exactly when it passes the MDE
        beyond = d.mean() >= result["positive"] if d.mean() > 0 else -d.mean() >= result["negative"]
        assert (sign_flip_test(d)["p"] <= threshold) == beyond


def test_too_few_seeds_for_the_exact_test_is_said_not_guessed():
    result = sign_flip_mde([0.1, 0.3, -0.2, 0.05, 0.4], alpha=0.05, comparisons=2)  # 2/32 = 0.0625 > 0.025
    assert result["mde"] is None and "5 seeds cannot reach p <= 0.025" in result["reason"]
    floor = exact_floor_seeds(0.05, 2)
    assert floor == 7 and 2 / 2 ** floor <= 0.025 < 2 / 2 ** (floor - 1)
    assert [exact_floor_seeds(0.05, m) for m in (1, 3, 6)] == [6, 7, 8]
    assert sign_flip_mde(np.arange(7.0), 0.05, 2)["mde"] is not None


def test_monte_carlo_mde_uses_the_tests_own_draws():
    d = np.random.default_rng(4).normal(0.0, 1.0, size=22)
    c = d - d.mean()
    result = sign_flip_mde(d, 0.05, 3, seed=9, resamples=20_000)
    assert result["method"] == "monte-carlo" and result["seed"] == 9
    for key, direction in (("positive", 1.0), ("negative", -1.0)):
        at = lambda delta: sign_flip_test(c + direction * delta, seed=9, resamples=20_000)["p"]  # noqa: E731
        assert at(result[key]) <= 0.05 / 3 < at(result[key] - 1e-6)


def test_the_bootstrap_interval_of_a_shift_is_the_shifted_interval():
    d = np.array([0.03, -0.01, 0.05, 0.02, -0.04, 0.01, 0.06])
    c = d - d.mean()
    low, high = bootstrap_interval(c, seed=5)
    for delta in (0.0, 0.013, -0.2, 1.5):
        shifted = bootstrap_interval(c + delta, seed=5)
        assert shifted == pytest.approx((low + delta, high + delta), abs=1e-12)
    mde = bootstrap_mde(d, seed=5)
    assert mde["positive"] == pytest.approx(-low) and mde["negative"] == pytest.approx(high)
    assert bootstrap_interval(c + mde["positive"] + 1e-9, seed=5)[0] > 0
    assert bootstrap_interval(c + mde["positive"] - 1e-9, seed=5)[0] <= 0
    assert bootstrap_interval(c - mde["negative"] - 1e-9, seed=5)[1] < 0


PILOTS = [[0.02, -0.01, 0.04, 0.00, 0.03], [0.03, 0.05, 0.04, 0.06], [0.1, -0.3, 0.25, 0.05, 0.0, 0.2, -0.1],
          [0.011, 0.018, -0.004, 0.03, 0.002, 0.009]]


@pytest.mark.parametrize("pilot", PILOTS)
def test_the_design_has_the_pilots_sample_sd_at_every_seed_count(pilot):
    for n in range(2, 41):
        assert np.std(design_like(pilot, n), ddof=1) == pytest.approx(np.std(pilot, ddof=1))
    assert sorted(design_like(pilot, len(pilot))) == pytest.approx(sorted(np.array(pilot) - np.mean(pilot)))


@pytest.mark.parametrize("pilot", PILOTS)
@pytest.mark.parametrize("effect", [0.01, 0.03])
def test_seeds_needed_holds_for_every_larger_count(pilot, effect):
    most = 30
    need = seeds_needed(pilot, effect, comparisons=2, seed=1, most=most)
    flip = lambda n: sign_flip_mde(design_like(pilot, n), 0.05, 2, 1, resamples=20_000)["mde"]  # noqa: E731
    boot = lambda n: bootstrap_mde(design_like(pilot, n), 1)["mde"]  # noqa: E731
    assert need["floor"] == 7
    for key, figure, start in (("sign_flip", flip, 7), ("bootstrap", boot, 10)):
        n = need[key]
        if n is None:
            assert figure(most) is None or figure(most) > effect
            continue
        assert n >= start
        assert all(figure(k) is not None and figure(k) <= effect for k in range(n, most + 1))
        if n > start:
            assert figure(n - 1) is None or figure(n - 1) > effect


def test_seeds_needed_never_reports_a_bootstrap_count_below_ten():
    need = seeds_needed(PILOTS[0], float("inf"), comparisons=2, seed=1, most=12)
    assert need["sign_flip"] == 7 and need["bootstrap"] == 10 and need["bootstrap_fewest"] == 10
    with pytest.raises(ValueError, match="must be > 0"):
        seeds_needed(PILOTS[0], 0.0, 1, 1)


def test_non_finite_differences_are_refused_in_one_line():
    for call in (lambda d: sign_flip_mde(d), lambda d: bootstrap_mde(d, 0), lambda d: design_like(d, 4)):
        with pytest.raises(ValueError, match="difference 3 of 3 is inf"):
            call([0.1, 0.2, float("inf")])


# ---------------------------------------------------------------- a finished sweep, written without training


def fake_sweep(tmp_path: Path, seeds=range(1, 9), name: str = "pilot") -> Path:
    """A sweep folder of the tiny spec whose receipts hold made-up metrics (and a sweep log of job times)."""
    spec = load_spec(write_spec(tmp_path, name="fake.toml"), seeds=list(seeds))
    out = tmp_path / name
    out.mkdir()
    (out / "spec.json").write_text(json.dumps(spec.to_dict()))
    rng = np.random.default_rng(0)
    log = []
    for arm, lift in (("repeated-8", 0.0), ("diverse-88", 0.03)):
        for seed in spec.seeds:
            value = 0.5 + lift + 0.02 * rng.normal()
            folder = out / "runs" / arm / f"seed-{seed}"
            folder.mkdir(parents=True)
            metrics = {label: {"target_byte_accuracy": value, "target_loss": 2.0 - value} for label in ("2", "4")}
            (folder / "receipt.json").write_text(json.dumps({"metrics": metrics, "seed": seed}))
            log.append(json.dumps({"job": f"{arm}/seed-{seed}", "status": "done", "seconds": 10.0 + seed}))
    (out / "sweep-log.jsonl").write_text("\n".join(log) + "\n")
    return out


def keys_of(value) -> set:
    if isinstance(value, dict):
        return set(value) | set().union(*(keys_of(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(keys_of(v) for v in value))
    return set()


def test_analyze_records_and_prints_the_smallest_detectable_effect(tmp_path, capsys):
    out = fake_sweep(tmp_path)
    result = analyze(out, charts=False)
    (c,) = [c for c in result["comparisons"] if c["checkpoint"] == "4" and c["metric"] == "target_byte_accuracy"]
    det = c["detectable"]
    assert det["holm_over"] == 1 and det["sign_flip_method"] == "exact"
    assert det["sign_flip"] == sign_flip_mde(c["differences"], 0.05, 1, result["statistics"]["seed"])["mde"]
    assert det["bootstrap"] == bootstrap_mde(c["differences"], result["statistics"]["seed"])["mde"]
    report = (out / "REPORT.md").read_text()
    assert "smallest detectable" in report and "(sign-flip, Holm over 1)" in report
    assert main(["analyze", str(out), "--no-charts"]) == 0
    printed = capsys.readouterr().out
    assert f"{c['arm']} - {c['against']}:" in printed and detectable_text("target_byte_accuracy", c) in printed
    assert "about 50% power" in result["statistics"]["detectable"]


def test_analysis_json_is_the_same_bytes_when_analyzed_twice(tmp_path):
    out = fake_sweep(tmp_path)
    analyze(out, charts=False)
    first = (out / "analysis.json").read_bytes()
    analyze(out, charts=False)
    assert (out / "analysis.json").read_bytes() == first
    timed = [k for k in keys_of(json.loads(first)) if any(w in k for w in ("second", "time", "elapsed", "date"))]
    assert not timed, timed


def test_analyze_says_when_the_seeds_are_too_few_and_the_bootstrap_excludes_zero(tmp_path, capsys):
    out = fake_sweep(tmp_path, seeds=range(1, 5))
    assert main(["analyze", str(out), "--no-charts"]) == 0
    printed = capsys.readouterr().out
    (c,) = [c for c in json.loads((out / "analysis.json").read_text())["comparisons"]
            if c["checkpoint"] == "4" and c["metric"] == "target_byte_accuracy"]
    assert c["bootstrap95"][1] < 0  # the fixture: all four seeds one way, the bootstrap interval excludes 0
    assert ("4 seeds cannot reach p <= 0.05 (sign-flip, Holm over 1); bootstrap interval excludes 0 (liberal at "
            "few seeds)") in printed
    assert "no difference larger than" not in printed.split("target_byte_accuracy at 4:")[1].split("\n")[1]


def comparison_row(d, comparisons: int, holm_p: float, seed: int = 0) -> dict:
    d = np.asarray(d, dtype=float)
    return {"n": len(d), "mean_difference": float(d.mean()), "holm_p": holm_p,
            "bootstrap95": list(bootstrap_interval(d, seed)), "detectable": detectable_effects(d, comparisons, seed)}


def test_each_phrase_follows_its_own_tests_verdict():
    # eight seeds, Holm over 3: the sign-flip does not reject, the bootstrap interval excludes 0
    d = [0.012, 0.061, 0.033, 0.033, 0.01, -0.013, 0.023, 0.022]
    p = sign_flip_test(d)["p"]
    row = comparison_row(d, 3, min(1.0, 3 * p))
    assert row["holm_p"] > 0.05 and row["bootstrap95"][0] > 0
    text = detectable_text("target_byte_accuracy", row)
    assert text.startswith("no difference larger than") and "(sign-flip, Holm over 3)" in text
    assert text.endswith("; bootstrap interval excludes 0 (liberal at few seeds)")
    # and when neither rejects, both say "no difference larger than", the bootstrap's figure rounded up
    d = [0.02, -0.03, 0.01, 0.04, -0.02, 0.0, 0.03, -0.01]
    row = comparison_row(d, 1, sign_flip_test(d)["p"])
    assert detectable_text("target_byte_accuracy", row).endswith(
        f"no difference larger than {magnitude('target_byte_accuracy', row['detectable']['bootstrap'])} (bootstrap)")


def test_a_comparison_rejected_at_a_later_holm_step_is_not_called_undetectable():
    # one Holm family, different n (a missing job): six seeds cannot reach 0.05 / 2, yet Holm's second step rejects
    short, full = [0.03, 0.05, 0.04, 0.06, 0.02, 0.07], np.linspace(0.05, 0.1, 12)
    holm_p = holm([sign_flip_test(short)["p"], sign_flip_test(full)["p"]])
    row = comparison_row(short, 2, holm_p[0])
    assert row["detectable"]["sign_flip"] is None and row["holm_p"] <= 0.05
    text = detectable_text("target_byte_accuracy", row)
    assert text.startswith("detected (Holm p 0.0312 <= 0.05); at Holm's first step 6 seeds cannot reach p <= 0.025")


def test_a_detected_effect_shows_its_own_directions_figure_at_holms_first_step():
    # the observed direction's figure (never above a detected effect there), not the larger of the two
    d = [0.05, 0.06, 0.055, 0.07, 0.045, 0.065, 0.3, 0.06]
    row = comparison_row(d, 1, sign_flip_test(d)["p"])
    det = row["detectable"]
    assert row["holm_p"] <= 0.05 and det["sign_flip_positive"] < det["sign_flip_negative"]
    assert det["sign_flip_positive"] <= row["mean_difference"]
    text = detectable_text("target_byte_accuracy", row)
    assert (f"detectable from {magnitude('target_byte_accuracy', det['sign_flip_positive'])} at Holm's first step "
            "(sign-flip, Holm over 1)") in text
    assert magnitude("target_byte_accuracy", det["sign_flip_negative"]) not in text


def test_one_seed_reads_in_words():
    row = comparison_row([0.02], 1, 1.0)
    assert detectable_text("target_byte_accuracy", row) == ("1 seed cannot reach p <= 0.05 (sign-flip, Holm over 1); "
                                                            "no bootstrap interval from one seed")


def test_printed_figures_are_rounded_up():
    assert magnitude("target_byte_accuracy", 0.01301) == "1.4 pp"
    assert magnitude("target_byte_accuracy", 0.013) == "1.3 pp"
    assert magnitude("target_loss", 0.0123401) == "0.01235" and magnitude("target_loss", 2.5) == "2.5"


def test_a_seed_whose_metric_is_nan_is_left_out_and_named(tmp_path, capsys):
    out = fake_sweep(tmp_path)
    receipt = out / "runs" / "diverse-88" / "seed-3" / "receipt.json"
    held = json.loads(receipt.read_text())
    held["metrics"]["4"]["target_byte_accuracy"] = float("nan")
    receipt.write_text(json.dumps(held))
    result = analyze(out, charts=False)
    (c,) = [c for c in result["comparisons"] if c["checkpoint"] == "4" and c["metric"] == "target_byte_accuracy"]
    assert c["n"] == 7 and c["not_finite_seeds"] == [3] and 3 not in c["seeds"]
    assert main(["analyze", str(out), "--no-charts"]) == 0
    assert "seed 3 left out (metric not a number)" in capsys.readouterr().out


def test_the_docs_state_the_exact_tests_floor():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "studies" / "index.md").read_text()
    floors = {m: exact_floor_seeds(0.05, m) - 1 for m in (1, 2, 8)}  # the most seeds that cannot reject anything
    assert floors == {1: 5, 2: 6, 8: 8}
    assert (f"{floors[1]} or fewer seeds with one comparison, {floors[2]} or fewer with 2, {floors[8]} or fewer "
            "with 8") in " ".join(docs.split())


def listing(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_plan_prints_the_jobs_and_writes_nothing(tmp_path, capsys):
    spec = write_spec(tmp_path)
    pilot = fake_sweep(tmp_path)
    before = listing(tmp_path)
    for out in ([], ["--out", str(tmp_path / "not-yet")]):
        assert main(["sweep", "--plan", str(spec), *out]) == 0
        printed = capsys.readouterr().out
        assert "sweep tiny: 6 jobs (2 arms x 3 seeds of expression-pretrain)" in printed
        assert "repeated-8: 3 expression-pretrain jobs" in printed and "not timed" in printed
    assert main(["sweep", "--plan", str(spec), "--pilot", str(pilot), "--effect", "0.02", "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    differences = json.loads(json.dumps(analyze_free_differences(pilot)))
    need = seeds_needed(differences, 0.02, comparisons=1, seed=load_spec(spec).analysis_seed)
    assert f"to detect 2.0 pp: {need['sign_flip']} seeds (sign-flip)" in printed
    assert "the exact test needs at least 6 seeds" in printed and "median 14.5 s a job" in printed
    assert listing(tmp_path) == before  # no folder, no file, the pilot untouched


def analyze_free_differences(pilot: Path) -> list[float]:
    """The pilot's diverse-88 - repeated-8 differences at the last checkpoint, read straight from its receipts."""
    read = lambda arm, s: json.loads((pilot / "runs" / arm / f"seed-{s}" / "receipt.json").read_text())  # noqa: E731
    return [read("diverse-88", s)["metrics"]["4"]["target_byte_accuracy"]
            - read("repeated-8", s)["metrics"]["4"]["target_byte_accuracy"] for s in range(1, 9)]


@pytest.mark.slow
def test_plan_time_trains_briefly_in_a_temporary_folder_and_writes_nothing(tmp_path, capsys):
    spec = write_spec(tmp_path)
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(spec), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "from a short timing of diverse-88" in printed and "for the 6 jobs" in printed
    assert listing(tmp_path) == before


def lift_pilot(tmp_path: Path, seeds=range(1, 7)) -> Path:
    """A pilot of the shipped broad-run spec (rl-splits: one arm, no comparisons, lifts tested against zero)."""
    spec = load_spec("broad-run", seeds=list(seeds))
    out = tmp_path / "lift-pilot"
    out.mkdir()
    (out / "spec.json").write_text(json.dumps(spec.to_dict()))
    rng = np.random.default_rng(3)
    for seed in spec.seeds:
        folder = out / "runs" / "broad" / f"seed-{seed}"
        folder.mkdir(parents=True)
        metrics = {m: float(rng.normal(0.03, 0.02)) for m in spec.metrics}
        (folder / "receipt.json").write_text(json.dumps({"metrics": {"eval": metrics}, "seed": seed}))
    return out


def test_plan_plans_a_lift_only_study(tmp_path, capsys):
    pilot = lift_pilot(tmp_path)
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "broad-run", "--pilot", str(pilot), "--effect", "0.03"]) == 0
    printed = capsys.readouterr().out
    spec = load_spec("broad-run")
    lifts = [m for m in spec.metrics if m.endswith("_lift")]
    assert "comparisons: none" in printed and "Holm over them): \n" not in printed
    assert f"lift tests: each arm's {len(lifts)} lift metrics against zero, Holm over them" in printed
    assert f"with Holm over {len(lifts)}, the exact test needs at least {exact_floor_seeds(0.05, len(lifts))} seeds"\
        in printed
    values = [json.loads(f.read_text())["metrics"]["eval"]["confirm_lift"]
              for f in sorted((pilot / "runs" / "broad").glob("*/receipt.json"))]
    need = seeds_needed(values, 0.03, comparisons=len(lifts), seed=spec.analysis_seed)
    assert (f"broad confirm_lift against zero (pilot: 6 seeds, sd {np.std(values, ddof=1):.3g}; Holm over "
            f"{len(lifts)})") in printed
    assert f"to detect 3.0 pp: {need['sign_flip']} seeds (sign-flip)" in printed
    assert listing(tmp_path) == before


def test_a_lift_only_plan_of_a_metric_that_is_not_a_lift_is_refused(tmp_path, capsys):
    pilot = lift_pilot(tmp_path)
    assert main(["sweep", "--plan", "broad-run", "--pilot", str(pilot), "--metric", "confirm_pass_at_1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "has no comparisons and 'confirm_pass_at_1' is not one of its lift metrics" in err


def test_plan_with_one_seed_and_a_pilot_says_no_figure_in_words(tmp_path, capsys):
    spec, pilot = write_spec(tmp_path), fake_sweep(tmp_path)
    assert main(["sweep", "--plan", str(spec), "--seeds", "1", "--pilot", str(pilot), "--effect", "0.02"]) == 0
    printed = capsys.readouterr().out
    assert ("with 1 seed, smallest detectable none (1 seed cannot reach p <= 0.05) (sign-flip) / none (one seed "
            "has no interval) (bootstrap)") in printed


@pytest.mark.slow
def test_plan_time_of_a_pretrain_eval_study_runs_its_own_job_briefly_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(
        'job = "pretrain-eval"\nseeds = [1, 2]\ncheckpoints = [20, 40]\nbaseline = "reference"\n'
        'metrics = ["train_loss", "greedy_pass_at_1"]\n[base]\nsteps = 40\nwarmup_steps = 5\nbatch_size = 2\n'
        'sequence_length = 128\nmax_sequence_length = 160\nprecision = "fp32"\ndev_max_new_tokens = 4\n'
        'eval_at = [20, 40]\neval_per_family = 3\neval_max_new_tokens = 4\n' + TINY_MODEL
        + '[arms.reference]\n[arms.long]\nsteps = 80\n[[comparisons]]\narm = "long"\nagainst = "reference"\n')
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(tmp_path / "a.toml"), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    (line,) = [x for x in printed.splitlines() if "from a short timing of reference (2 updates, one task per family)"
               in x]
    figures = {unit: value for value, unit in
               re.findall(r"([\d.]+) (ms an update|s a scoring|s an evaluation per task per family)", line)}
    assert set(figures) == {"ms an update", "s a scoring", "s an evaluation per task per family"}, line
    update, scoring = float(figures["ms an update"]) / 1000, float(figures["s a scoring"])
    evaluation = float(figures["s an evaluation per task per family"])
    # reference: 40 updates, 3 scorings (0, 20, 40), 2 x 3 evaluations; long: 80 updates, 4 scorings (and 80)
    expected = 2 * (40 * update + 3 * scoring + 6 * evaluation) + 2 * (80 * update + 4 * scoring + 6 * evaluation)
    total = float(re.search(r"about ([\d.]+) s for the 4 jobs", line).group(1))
    assert total == pytest.approx(expected, abs=1.0 + 0.02 * expected)  # the printed figures are rounded
    assert "upper bounds" in line and "not timed" not in printed
    assert listing(tmp_path) == before


@pytest.mark.slow
def test_plan_time_of_a_pretrain_study(tmp_path, capsys):
    (tmp_path / "p.toml").write_text(
        'job = "pretrain"\nseeds = [1]\ncheckpoints = [10]\nbaseline = "a"\n[base]\nsteps = 30\nbatch_size = 2\n'
        'sequence_length = 128\nmax_sequence_length = 160\nprecision = "fp32"\ndev_max_new_tokens = 4\n'
        + TINY_MODEL + '[arms.a]\n')
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(tmp_path / "p.toml"), "--workers", "1"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "from a short timing of a (2 updates" in x]
    update = float(re.search(r"([\d.]+) ms an update", line).group(1)) / 1000
    scoring = float(re.search(r"([\d.]+) s a scoring", line).group(1))
    total = float(re.search(r"about ([\d.]+) s for the 1 jobs", line).group(1))
    assert "evaluation" not in line and total == pytest.approx(30 * update + 3 * scoring, abs=1.0)
    assert listing(tmp_path) == before


def test_plan_time_of_a_kind_it_cannot_time_says_so_in_one_line(tmp_path, capsys):
    (tmp_path / "e.toml").write_text('job = "eval"\nseeds = [5]\nbaseline = "a"\n[base]\ncheckpoint = "nowhere"\n'
                                     '[arms.a]\n')
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(tmp_path / "e.toml")]) == 0
    printed = capsys.readouterr().out
    (line,) = [x for x in printed.splitlines() if "--time does not time eval jobs" in x]
    assert "--pilot DIR" in line
    assert listing(tmp_path) == before


class FakeClock:
    """The timing module's clock, moved only by the fakes below: the plan's arithmetic checked to the digit."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def fake_rl_timing(monkeypatch) -> FakeClock:
    """RL takes 11 s, 6 of them in two steps of 4 rollouts (0.75 s a rollout, 5 s fixed); an evaluation 0.5 s a
    task. The start (the setup shortened to 2 updates) still runs for real."""
    import glm53.evaluate.evaluate as evaluate_module
    import glm53.sweep.jobs as jobs_module
    from glm53.checkpoints.format import LoadedModel
    import glm53.sweep.timing as timing_module
    import glm53.train.rl as rl_module

    clock = FakeClock()

    def rl_train(cfg, log=print):
        assert Path(cfg.init).is_dir() and cfg.groups == 2 * cfg.groups_per_step  # 2 of the baseline's updates
        clock.now += 10.0
        return {"steps": [{"seconds": 3.0, "rollouts": 4}, {"seconds": 3.0, "rollouts": 4}]}

    def load_final(cfg, receipt):
        clock.now += 1.0
        return LoadedModel(None, "", True)  # what load_model returns; the fake evaluation reads no model

    def evaluate(model, tasks, config, accepted_partial=False):
        clock.now += 0.5 * len(tasks)

    monkeypatch.setattr(timing_module, "time", clock)
    monkeypatch.setattr(rl_module, "rl_train", rl_train)
    monkeypatch.setattr(jobs_module, "load_final", load_final)
    monkeypatch.setattr(evaluate_module, "evaluate", evaluate)
    return clock


@pytest.mark.slow
def test_plan_time_of_an_rl_eval_study_counts_each_arm_s_rollouts_and_its_evaluation(tmp_path, capsys, monkeypatch):
    fake_rl_timing(monkeypatch)
    # rloo: 2 groups of 2 a seed; grpo: 8 groups of 2; the evaluation: 2 tasks of 2 families, greedy and sampled
    (tmp_path / "rl.toml").write_text(RL_EVAL_SPEC.format(model=TINY_MODEL) + "groups = 8\n")
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(tmp_path / "rl.toml"), "--workers", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    (line,) = [x for x in printed if "from a short timing of rloo (2 updates of RL from a 2-update checkpoint of the "
               "setup's model (untrained), up to 4 tasks of each evaluation)" in x]
    assert "750 ms a rollout, 5.00 s fixed, 4.00 s the evaluation after RL" in line, line
    # rloo: 5 + 4 x 0.75 + 4 = 12 s; grpo: 5 + 16 x 0.75 + 4 = 21 s; two seeds each, one worker
    assert "about 66 s for the 4 jobs (decoding timed on untrained weights: rough; --setup-from DIR times a real " \
           "start)" in line, line
    assert any(x.startswith("  plus the setup job, run first and alone: about ") for x in printed)
    assert listing(tmp_path) == before


@pytest.mark.slow
def test_plan_time_of_an_rl_splits_study_scales_each_split_and_scores_the_start_once(tmp_path, capsys, monkeypatch):
    from glm53.data.suites import get_suite

    fake_rl_timing(monkeypatch)
    spec = RL_EVAL_SPEC.format(model=TINY_MODEL).replace('job = "rl-eval"', 'job = "rl-splits"').replace(
        'metrics = ["greedy_pass_at_1", "sampled_pass_at_1", "zero_variance_fraction"]', 'metrics = ["confirm_lift"]')
    (tmp_path / "s.toml").write_text(spec.replace("eval_per_family = 2\neval_samples = 2\n", "eval_count = 1\n"))
    assert main(["sweep", "--plan", "--time", str(tmp_path / "s.toml"), "--workers", "1"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "s the evaluation after RL" in x]
    suite = get_suite("reference")
    tasks = sum(len(suite.tasks(split, 1)) for split in suite.eval_splits)
    assert f"{0.5 * tasks:.2f} s the evaluation after RL" in line and "up to 4 tasks of each split" in line, line
    # rloo 5 + 3 + evaluation, grpo the same (its 2 x 2 rollouts here), two seeds each, and the start's scores once
    total = 4 * (8 + 0.5 * tasks) + 0.5 * tasks
    assert f"about {total:.0f} s for the 4 jobs" in line or f"about {total / 60:.0f} min for the 4 jobs" in line, line


@pytest.mark.slow
def test_plan_time_of_an_rl_study_runs_briefly_for_real_and_leaves_nothing(tmp_path, capsys):
    from ..verify.test_verifier import _sandbox_sessions, assert_nothing_left_of, new_sessions

    (tmp_path / "rl.toml").write_text(RL_EVAL_SPEC.format(model=TINY_MODEL))
    before, sandboxes = listing(tmp_path), _sandbox_sessions()
    plans = set(Path(tempfile.gettempdir()).glob("glm53-plan-*"))
    assert main(["sweep", "--plan", "--time", str(tmp_path / "rl.toml"), "--workers", "2"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "s the evaluation after RL" in x]
    rollout = float(re.search(r"(\d+) ms a rollout", line).group(1))
    assert rollout > 0 and "about " in line and "for the 4 jobs" in line
    assert listing(tmp_path) == before and set(Path(tempfile.gettempdir()).glob("glm53-plan-*")) <= plans
    # only pools started by the timing count: a pool alive before (another test's) forks its next warm process
    assert_nothing_left_of(new_sessions(sandboxes), "the plan's timing left sandbox workers behind")


@pytest.mark.slow
def test_plan_time_of_an_rl_study_from_a_finished_setup_uses_its_weights(tmp_path, capsys):
    (tmp_path / "rl.toml").write_text(RL_EVAL_SPEC.format(model=TINY_MODEL))
    done = tmp_path / "done"
    spec = load_spec(tmp_path / "rl.toml", [3])
    one_arm = replace(spec, arms={"rloo": spec.arms["rloo"]})
    assert run_sweep(one_arm, done, workers=1, progress=False, log=lambda *_: None)["done"] == 1
    before = listing(tmp_path)
    assert main(["sweep", "--plan", "--time", str(tmp_path / "rl.toml"), "--workers", "2", "--setup-from",
                 str(done)]) == 0
    printed = capsys.readouterr().out.splitlines()
    (line,) = [x for x in printed if f"2 updates of RL from the finished setup in {done}" in x]
    assert "untrained" not in line and not any("plus the setup job" in x for x in printed)
    assert listing(tmp_path) == before
    (tmp_path / "other.toml").write_text(RL_EVAL_SPEC.format(model=TINY_MODEL).replace("seed = 7", "seed = 8"))
    assert main(["sweep", "--plan", "--time", str(tmp_path / "other.toml"), "--setup-from", str(done)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is not this spec's" in err and "leave out --setup-from" in err, err


@pytest.mark.parametrize("case", ["setup-from without --time", "setup-from on a pretraining spec", "no start"])
def test_rl_plan_timings_that_cannot_run_are_refused_in_one_line(tmp_path, capsys, case):
    rl = tmp_path / "rl.toml"
    rl.write_text(RL_EVAL_SPEC.format(model=TINY_MODEL))
    no_start = tmp_path / "n.toml"
    no_start.write_text('job = "rl-eval"\nseeds = [1]\nbaseline = "a"\n[base]\ninit = "nowhere/checkpoint-0100"\n'
                        '[arms.a]\n')
    argv, expected = {
        "setup-from without --time": ([str(rl), "--setup-from", str(tmp_path)],
                                      "--time is not given: drop --setup-from"),
        "setup-from on a pretraining spec": ([str(write_spec(tmp_path)), "--time", "--setup-from", str(tmp_path)],
                                             "is expression-pretrain: drop --setup-from"),
        "no start": ([str(no_start), "--time"], "the start checkpoint nowhere/checkpoint-0100 does not exist; make it"),
    }[case]
    before = listing(tmp_path)
    assert main(["sweep", "--plan", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err, err
    assert listing(tmp_path) == before


def test_a_truncated_pilot_log_is_named_with_its_line(tmp_path, capsys):
    spec, pilot = write_spec(tmp_path), fake_sweep(tmp_path)
    with open(pilot / "sweep-log.jsonl", "a") as log:
        log.write('{"job": "x/seed-9", "sta')
    assert main(["sweep", "--plan", str(spec), "--pilot", str(pilot)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{pilot / 'sweep-log.jsonl'} line 17 is not JSON" in err, err


BAD_PLANS = {
    "effect nan": (["--effect", "nan", "--pilot", "{pilot}"], "--effect must be a finite number"),
    "effect inf": (["--effect", "inf", "--pilot", "{pilot}"], "--effect must be a finite number"),
    "effect zero": (["--effect", "0", "--pilot", "{pilot}"], "--effect must be > 0"),
    "effect negative": (["--effect", "-0.1", "--pilot", "{pilot}"], "--effect must be > 0"),
    "effect without pilot": (["--effect", "0.02"], "--effect needs --pilot DIR"),
    "pilot not a sweep": (["--pilot", "{tmp}"], "not a sweep folder"),
    "metric absent": (["--pilot", "{pilot}", "--metric", "perplexity"], "its spec has no metric 'perplexity'"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_bad_plans_are_refused_in_one_line_and_write_nothing(tmp_path, capsys, case):
    spec, pilot = write_spec(tmp_path), fake_sweep(tmp_path)
    flags, expected = BAD_PLANS[case]
    before = listing(tmp_path)
    argv = ["sweep", "--plan", str(spec)] + [f.format(pilot=pilot, tmp=tmp_path) for f in flags]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err, err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("flags,expected", [(["--effect", "0.02"], "belong to --plan"),
                                            (["--effect", "0"], "belong to --plan"),
                                            (["--time"], "belong to --plan"), ([], "--out is required")])
def test_plan_flags_without_plan_and_a_sweep_without_out_are_refused(tmp_path, capsys, flags, expected):
    spec = write_spec(tmp_path)
    before = listing(tmp_path)
    assert main(["sweep", str(spec), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err, err
    assert listing(tmp_path) == before


def test_lift_tests_record_the_smallest_detectable_lift():
    from glm53.sweep.analysis import detectable_text, lift_tests
    from glm53.sweep.jobs import job_kind
    from glm53.sweep.spec import SweepSpec

    lifts = [m for m in job_kind("rl-splits").metrics if m.endswith("_lift")][:2]
    spec = SweepSpec(name="lifts", description="", job="rl-splits", seeds=tuple(range(1, 9)), checkpoints=(),
                     metrics=tuple(lifts), baseline="a", base={}, arms={"a": {}}, comparisons=())
    rng = np.random.default_rng(2)
    values = {"a": {"eval": {m: {s: float(rng.normal(0.02, 0.03)) for s in spec.seeds} for m in lifts}}}
    rows = lift_tests(spec, values)
    assert len(rows) == 2
    for row in rows:
        assert row["detectable"]["holm_over"] == 2
        assert row["detectable"]["sign_flip"] == sign_flip_mde(row["lifts"], 0.05, 2, spec.analysis_seed)["mde"]
        assert "(sign-flip, Holm over 2)" in detectable_text(row["metric"], row)
