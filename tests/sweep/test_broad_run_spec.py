"""The broad-run sweep spec: it parses and plans (six RL seeds from one shared broad pretraining) without running;
the rl-splits job runs on a tiny model; `glm53 analyze` tests each split's lift against zero (exact sign flip)."""

import json
from pathlib import Path

from glm53 import GLM53, ModelConfig
from glm53.run_config import RunConfig
from glm53.sweep.analysis import analyze
from glm53.sweep.jobs import job_kind
from glm53.sweep.runner import SPEC_FILE, job_dir, plan_jobs, setup_job
from glm53.sweep.spec import load_spec, resolve_setup, shipped_specs
from glm53.recipes.book import pretraining
from glm53.checkpoints.format import save_checkpoint

from ..tiny import TINY

SPLITS = ("confirm", "compose", "phrase", "human", "dev", "rl")


def test_broad_run_parses_and_plans(tmp_path):
    assert "broad-run" in shipped_specs()
    spec = load_spec("broad-run")
    assert spec.job == "rl-splits" and len(spec.seeds) >= 6 and list(spec.arms) == ["broad"]
    assert [m for m in spec.metrics if m.endswith("_lift")] == [f"{s}_lift" for s in SPLITS]
    setup = setup_job(spec, tmp_path)
    pretraining = job_kind(setup.kind).make(setup.settings, setup.seed, setup.checkpoints, Path(setup.dir))
    assert (pretraining.suite, pretraining.sequence_length, pretraining.model.max_sequence_length) == ("broad", 324,
                                                                                                     384)
    preset = RunConfig.from_preset(str(tmp_path / "run"), "broad").pretrain  # the spec's setup names the preset
    got, wanted = pretraining.to_dict(), preset.to_dict()  # by the recorded names, every setting the model learns by
    assert {k for k in wanted if got.get(k) != wanted[k]} <= {"out", "progress", "report_group"}  # where it runs
    assert (got["optimizer"], got["model"]["tokenizer"], got["model"]["qk_norm"]) == ("muon", "broad-bpe-2048", True)
    jobs = plan_jobs(spec, tmp_path)
    assert len(jobs) == len(spec.seeds) and {j.seed for j in jobs} == set(spec.seeds)
    for job in jobs:
        made = job_kind(job.kind).make(resolve_setup(job.settings, job.setup_dir), job.seed, job.checkpoints,
                                       Path(job.dir))
        assert made.rl.init == str(tmp_path.resolve() / "setup" / "run" / "checkpoint-2400")
        assert (made.rl.suite, made.rl.sampling.max_new_tokens, made.rl.families, made.rl.seed) == ("broad", 192, "all",
                                                                                                    job.seed)
        assert made.splits() == ("dev", "rl", "confirm", "compose", "phrase", "human")
    # the spec's RL is the preset's, by every recorded name but where and with which seed it runs
    got, differing = _differences_from_the_presets_rl(made.rl, tmp_path)
    assert differing <= WHERE_AND_HOW_SCORED
    assert (got["groups"], got["lr"], got["train_scope"], got["objective"], got["task_source"]) == (
        512, 2e-4, "all", "rejection-sampling", "stream")
    assert not any(tmp_path.iterdir())  # planning wrote nothing


# each job its own seed and folder; the run chooses its checkpoint on dev, the job scores the last
WHERE_AND_HOW_SCORED = {"init", "seed", "out", "progress", "report_group", "checkpoints", "dev_per_family",
                        "dev_samples", "dev_temperature"}


def _flat(settings: dict) -> dict:
    """A recorded config's settings by their last names (the flags' names), nested sections opened."""
    out = {}
    for key, value in settings.items():
        out.update(_flat(value) if isinstance(value, dict) else {key: value})
    return out


def _differences_from_the_presets_rl(rl, tmp_path) -> tuple[dict, set]:
    """An RL config's settings by name, and the names where --preset broad's RL differs from it."""
    got, wanted = _flat(rl.to_dict()), _flat(RunConfig.from_preset(str(tmp_path / "run"), "broad").rl.to_dict())
    return got, {k for k in got.keys() | wanted.keys() if got.get(k) != wanted.get(k)}


# the broad suite's RL studies in the order they ran: each draws seeds none before it used
BROAD_RL_STUDIES = ("broad-run", "rl-screen-broad", "rl-screen-broad-confirm", "rl-generalize", "rl-generalize-confirm",
                    "rl-generalize-adopt", "rl-generalize-compose", "rl-generalize-compose-confirm")


def _seeds_before(study: str) -> set:
    return set().union(*(load_spec(name).seeds for name in BROAD_RL_STUDIES[:BROAD_RL_STUDIES.index(study)]))


def test_rl_splits_job_on_a_tiny_model(tmp_path):
    start = tmp_path / "start"
    save_checkpoint(start, GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384})), {"step": 0})
    kind = job_kind("rl-splits")
    settings = {"init": str(start), "suite": "broad", "groups": 2, "group_size": 2, "groups_per_step": 2,
                "tasks_per_family": 4, "max_new_tokens": 8, "eval_count": 2, "eval_splits": "confirm,compose"}
    job = kind.make(settings, 7, (2,), tmp_path / "job")
    receipt = kind.run(job, tmp_path / "job", lambda *_: None)
    metrics = receipt["metrics"]["eval"]
    assert receipt["suite"] == "broad" and receipt["language"] == "python"
    assert set(metrics) == {f"{s}_{m}" for s in ("confirm", "compose")
                            for m in ("lift", "pass_at_1", "pass_at_1_before")}
    assert metrics["confirm_lift"] == metrics["confirm_pass_at_1"] - metrics["confirm_pass_at_1_before"]
    assert not list((tmp_path / "job" / "run").glob("checkpoint-*/model.safetensors"))  # weights dropped


def test_analyze_tests_each_lift_against_zero(tmp_path):
    spec = load_spec("broad-run")
    (tmp_path / SPEC_FILE).write_text(json.dumps(spec.to_dict()))
    for n, seed in enumerate(spec.seeds):
        metrics = {}
        for s in SPLITS:
            lift = {"confirm": 0.05 + 0.01 * n, "compose": (-1) ** n * 0.02}.get(s, 0.0)
            metrics.update({f"{s}_pass_at_1_before": 0.3, f"{s}_pass_at_1": 0.3 + lift, f"{s}_lift": lift})
        folder = job_dir(tmp_path, "broad", seed)
        folder.mkdir(parents=True)
        (folder / "receipt.json").write_text(json.dumps({"metrics": {"eval": metrics}, "seed": seed}))
    result = analyze(tmp_path, charts=False)
    lifts = {r["metric"]: r for r in result["lifts"]}
    n = len(spec.seeds)
    assert lifts["confirm_lift"]["up"] == n and lifts["confirm_lift"]["p"] == 2 / 2 ** n  # every seed up: exact
    assert lifts["confirm_lift"]["test"] == "exact" and lifts["confirm_lift"]["holm_p"] >= 2 / 2 ** n
    # Holm over the six splits: the spec has the seeds to reject when every seed agrees (2 / 2^n <= 0.05 / 6)
    assert lifts["confirm_lift"]["holm_p"] <= 0.05
    assert lifts["compose_lift"]["p"] == 1.0
    assert (lifts["compose_lift"]["up"], lifts["compose_lift"]["down"]) == (n // 2, n // 2)
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Lifts (after - before within each job), tested against zero" in report
    assert f"| broad | eval | confirm_lift | +{100 * (0.05 + 0.01 * (n - 1) / 2):.1f} pp |" in report


def test_rl_splits_jobs_of_one_sweep_share_the_start_scores(tmp_path):
    """Inside a sweep folder the second job reads the start's scores the first wrote, and they equal a fresh
    evaluation; a job outside a sweep folder computes its own."""
    start = tmp_path / "start"
    save_checkpoint(start, GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384})), {"step": 0})
    kind = job_kind("rl-splits")
    settings = {"init": str(start), "suite": "broad", "groups": 2, "group_size": 2, "groups_per_step": 2,
                "tasks_per_family": 4, "max_new_tokens": 8, "eval_count": 2, "eval_splits": "confirm,compose"}
    sweep = tmp_path / "sweep"
    receipts = []
    for arm, seed in (("a", 1), ("b", 2)):
        folder = job_dir(sweep, arm, seed)
        receipts.append(kind.run(kind.make(settings, seed, (), folder), folder, lambda *_: None))
    alone = kind.run(kind.make(settings, 3, (), tmp_path / "alone"), tmp_path / "alone", lambda *_: None)
    assert receipts[0]["start_scores"] == "computed" and receipts[1]["start_scores"].startswith("read start-scores/")
    assert alone["start_scores"] == "computed (not in a sweep folder)"
    before = [{k: v for k, v in r["metrics"]["eval"].items() if k.endswith("_before")} for r in (*receipts, alone)]
    assert before[0] == before[1] == before[2]
    (saved,) = (sweep / "start-scores").iterdir()
    assert json.loads(saved.read_text())["identity"]["weights_sha256"] == receipts[0]["initial_sha256"]
    # other tasks: another file; a damaged file: computed again and replaced
    folder = job_dir(sweep, "c", 4)
    other = kind.run(kind.make({**settings, "eval_count": 3}, 4, (), folder), folder, lambda *_: None)
    assert other["start_scores"] == "computed" and len(list((sweep / "start-scores").iterdir())) == 2
    saved.write_text("{not json")
    folder = job_dir(sweep, "d", 5)
    again = kind.run(kind.make(settings, 5, (), folder), folder, lambda *_: None)
    assert again["start_scores"] == "computed" and json.loads(saved.read_text())["result"]


def test_rl_screen_broad_plans_its_arms(tmp_path):
    """The broad RL screen (run e4's start, below) plans ten seeds of every arm seed by seed, and each arm differs
    from the baseline in its own settings."""
    screen, run = load_spec("rl-screen-broad"), load_spec("broad-run")
    assert screen.job == "rl-splits" and len(screen.seeds) >= 10
    assert not set(screen.seeds) & set(run.seeds)
    jobs = plan_jobs(screen, tmp_path)
    assert [j.seed for j in jobs[:len(screen.arms)]] == [screen.seeds[0]] * len(screen.arms)  # whole seeds first
    base = screen.settings("baseline")
    for arm in screen.arms:
        made = job_kind("rl-splits").make(resolve_setup(screen.settings(arm), str(tmp_path / "setup")), 1, (),
                                          tmp_path / arm)
        assert made.splits() == ("confirm", "compose", "phrase", "human") and made.rl.suite == "broad"
        assert arm == "baseline" or screen.settings(arm) != base, arm
    assert not any(tmp_path.iterdir())


def test_the_confirmation_reruns_the_screens_arms_on_fresh_seeds():
    screen, confirm = load_spec("rl-screen-broad"), load_spec("rl-screen-broad-confirm")
    assert confirm.setup == screen.setup and confirm.base == screen.base and confirm.metrics == screen.metrics
    assert set(confirm.arms) < set(screen.arms) and all(confirm.arms[a] == screen.arms[a] for a in confirm.arms)
    assert len(confirm.seeds) >= 10 and not set(confirm.seeds) & set(screen.seeds)


def test_the_broad_rl_screens_of_2026_12_02_keep_their_start(tmp_path):
    """rl-screen-broad and its confirmation measured RL from run e4 (the preset's pretraining until 2026-12-03):
    their [setup] names the recipe e4, so they rerun as their study pages record them."""
    e4 = pretraining("e4")
    for name in ("rl-screen-broad", "rl-screen-broad-confirm"):
        assert load_spec(name).recipes == {"setup": "e4"}
        setup = setup_job(load_spec(name), tmp_path)
        made = job_kind(setup.kind).make(setup.settings, setup.seed, setup.checkpoints, Path(setup.dir))
        assert made.steps == e4["steps"] == 3600 and made.optimization.optimizer == "adamw", name
        assert (made.model.tokenizer, made.model.qk_norm, made.model.dim) == ("byte", False, e4["dim"]), name


def test_rl_generalize_starts_from_the_preset_and_changes_one_thing_an_arm(tmp_path):
    """Issue 47's screen: the broad-run spec's start (the preset's pretraining), fresh seeds, and each arm's
    settings differ from the baseline's; every arm's job builds (the new choices included)."""
    screen, run = load_spec("rl-generalize"), load_spec("broad-run")
    assert screen.setup == run.setup and screen.job == "rl-splits" and len(screen.seeds) >= 10
    used = _seeds_before("rl-generalize")
    assert not set(screen.seeds) & used
    base = screen.settings("baseline")
    made = {arm: job_kind("rl-splits").make(resolve_setup(screen.settings(arm), str(tmp_path / "setup")), 1, (),
                                            tmp_path / arm).rl for arm in screen.arms}
    assert made["baseline"].init.endswith("checkpoint-2400")
    for arm in screen.arms:
        assert arm == "baseline" or screen.settings(arm) != base, arm
    assert (made["rejection-sampling"].objective, made["experts"].train_scope) == ("rejection-sampling", "experts")
    assert made["budget-4x-stream"].task_source == "stream" and made["budget-4x"].groups == 4 * made["baseline"].groups
    assert not any(tmp_path.iterdir())


def test_the_rl_generalize_confirmation_reruns_its_leaders_on_fresh_seeds():
    screen, confirm = load_spec("rl-generalize"), load_spec("rl-generalize-confirm")
    assert confirm.setup == screen.setup and confirm.base == screen.base and confirm.metrics == screen.metrics
    assert "baseline" in confirm.arms and set(confirm.arms) < set(screen.arms)
    assert all(confirm.arms[a] == screen.arms[a] for a in confirm.arms)
    used = _seeds_before("rl-generalize-confirm")
    assert len(confirm.seeds) >= 10 and not set(confirm.seeds) & used


def test_the_adoption_test_reads_the_leaders_against_the_presets_own_rl():
    """rl-generalize-adopt: the preset's RL until 2026-12-04 as the baseline, the screen's leaders unchanged, one
    exploratory arm, and seeds no other study used."""
    screen, adopt = load_spec("rl-generalize"), load_spec("rl-generalize-adopt")
    assert adopt.setup == screen.setup and adopt.base == screen.base and adopt.metrics == screen.metrics
    assert adopt.baseline == "preset" and set(adopt.arms) - set(screen.arms) == {"budget-8x-stream"}
    assert all(adopt.arms[a] == screen.arms[a] for a in set(adopt.arms) & set(screen.arms))
    used = _seeds_before("rl-generalize-adopt")
    assert len(adopt.seeds) >= 10 and not set(adopt.seeds) & used
    wider = adopt.settings("budget-8x-stream")
    assert wider["groups"] == 2 * adopt.settings("budget-4x-stream")["groups"] and wider["task_source"] == "stream"
    assert wider["groups"] // wider["groups_per_step"] == adopt.settings("budget-4x")["groups"] // adopt.settings(
        "budget-4x")["groups_per_step"]  # the same number of updates
    assert wider["tasks_per_family"] == wider["groups"]  # every group a fresh stream task


def test_the_broad_presets_rl_is_the_adopted_arm(tmp_path):
    """--preset broad runs the RL that rl-generalize-compose-confirm measured as stream-rejection-sampling, by every
    recorded name but where and with which seed it runs and the run's choice of checkpoint on dev (the job scores
    its last)."""
    spec = load_spec("rl-generalize-compose-confirm")
    made = job_kind("rl-splits").make(resolve_setup(spec.settings("stream-rejection-sampling"),
                                                    str(tmp_path / "setup")), 1, (), tmp_path / "job").rl
    got, differing = _differences_from_the_presets_rl(made, tmp_path)
    assert differing <= WHERE_AND_HOW_SCORED
    wanted = RunConfig.from_preset(str(tmp_path / "run"), "broad").rl
    assert wanted.checkpoints[-1] == got["groups"] and not any(tmp_path.iterdir())


def test_the_compose_screen_changes_one_thing_of_budget_4x_stream_on_fresh_seeds():
    """rl-generalize-compose: budget-4x-stream as screened is the baseline, each arm one change of it."""
    screen, compose = load_spec("rl-generalize"), load_spec("rl-generalize-compose")
    assert compose.setup == screen.setup and compose.base == screen.base and compose.metrics == screen.metrics
    leader = "budget-4x-stream"
    assert compose.baseline == leader and compose.arms[leader] == screen.arms[leader]
    base = compose.settings("budget-4x-stream")
    for arm in set(compose.arms) - {"budget-4x-stream"}:
        changed = {k for k in base.keys() | compose.settings(arm).keys() if base.get(k) != compose.settings(arm).get(k)}
        assert len(changed) == 1, (arm, changed)
    used = _seeds_before("rl-generalize-compose")
    assert len(compose.seeds) >= 10 and not set(compose.seeds) & used


def test_the_compose_confirmation_reruns_its_leader_on_fresh_seeds_against_the_preset():
    screen, compose = load_spec("rl-generalize"), load_spec("rl-generalize-compose")
    confirm = load_spec("rl-generalize-compose-confirm")
    assert confirm.setup == screen.setup and confirm.base == screen.base and confirm.metrics == screen.metrics
    assert confirm.baseline == "budget-4x" and confirm.arms["budget-4x"] == screen.arms["budget-4x"]
    assert all(confirm.arms[a] == compose.arms[a] for a in set(confirm.arms) - {"budget-4x"})
    used = _seeds_before("rl-generalize-compose-confirm")
    assert len(confirm.seeds) >= 10 and not set(confirm.seeds) & used
