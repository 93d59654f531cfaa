"""A tiny sweep end to end: parallel jobs, resume after SIGINT and SIGKILL, failures, bad specs."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from glm53.cli import main
from glm53.sweep.analysis import analyze
from glm53.sweep.executor import LocalExecutor, SourceChanged, source_changes
from glm53.sweep.runner import keep_without_checkpoints, plan_jobs, reuse_finished, run_sweep
from glm53.sweep.spec import load_spec, shipped_specs

TINY_SPEC = """
name = "tiny"
job = "expression-pretrain"
seeds = [1, 2, 3]
checkpoints = [2, {steps}]
metrics = ["target_byte_accuracy", "target_loss"]
baseline = "diverse-88"
[base]
steps = {steps}
batch_size = 4
dim = 16
heads = 2
expert_hidden = 16
[arms.repeated-8]
data_order = "repeated-8"
[arms.diverse-88]
data_order = "diverse-88"
"""


def write_spec(tmp_path: Path, steps: int = 4, extra: str = "", name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(TINY_SPEC.format(steps=steps) + extra)
    return path


def receipt(out: Path, arm: str, seed: int) -> dict:
    return json.loads((out / "runs" / arm / f"seed-{seed}" / "receipt.json").read_text())


def assert_run_receipt_exists(out: Path, arm: str, seed: int) -> None:
    """A job receipt's `run_receipt` names the training receipt it was made from, relative to the job folder."""
    pointer = receipt(out, arm, seed)["run_receipt"]
    assert (out / "runs" / arm / f"seed-{seed}" / pointer).is_file(), pointer


def without_timings(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "elapsed_seconds"}


@pytest.mark.slow
def test_tiny_sweep_end_to_end_and_rerun_skips(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    out = tmp_path / "sweep"
    summary = run_sweep(spec, out, workers=2, progress=False, log=lambda *_: None)
    assert summary["done"] == 6 and not summary["failed"]
    result = analyze(out)
    assert set(result["arms"]) == {"repeated-8", "diverse-88"}
    cell = result["arms"]["diverse-88"]["4"]["target_byte_accuracy"]
    assert cell["n"] == 3 and set(cell["per_seed"]) == {"1", "2", "3"}
    (c,) = [c for c in result["comparisons"] if c["checkpoint"] == "4" and c["metric"] == "target_byte_accuracy"]
    assert c["n"] == 3 and c["p"] is not None and c["holm_p"] == c["p"]  # one comparison: Holm changes nothing
    assert (out / "REPORT.md").is_file() and all((out / chart).is_file() for chart in result["charts"])
    again = run_sweep(spec, out, workers=2, progress=False, log=lambda *_: None)
    assert again["skipped"] == 6 and again["done"] == 0
    # same seed, same receipt (timings aside), also in a job rerun from nothing
    other = tmp_path / "sweep-again"
    run_sweep(load_spec(write_spec(tmp_path), seeds=[2]), other, workers=1, progress=False, log=lambda *_: None)
    assert without_timings(receipt(other, "repeated-8", 2)) == without_timings(receipt(out, "repeated-8", 2))


class EditsSourceAtFirst(LocalExecutor):
    """The local pool, watching `source_root`, whose files change at the first job's `event` (as an edit would)."""

    def __init__(self, event, *args):
        super().__init__(*args)
        self.event = event

    def run(self, jobs, on_event):
        def edit_then_report(event, job, detail):
            if event == self.event and not (self.source_root / "edited.py").exists():
                (self.source_root / "edited.py").write_text("changed = True\n")
                (self.source_root / ".#model.py").symlink_to("nowhere@1234")  # an editor's lock: not watched
            on_event(event, job, detail)

        super().run(jobs, edit_then_report)


@pytest.mark.slow
@pytest.mark.parametrize("event", ["started", "done"])
def test_a_sweep_stops_when_its_package_source_changes_and_the_rerun_finishes(tmp_path, monkeypatch, capsys, event):
    source = tmp_path / "package"
    (source / "sweep" / "specs").mkdir(parents=True)
    (source / "model.py").write_text("x = 1\n")
    (source / "sweep" / "specs" / "other.toml").write_text("")
    monkeypatch.setattr("glm53.sweep.executor._BASELINES", {})
    spec, out = load_spec(write_spec(tmp_path)), tmp_path / "sweep"
    with pytest.raises(SourceChanged, match="source changed since this sweep started .1 file under .*edited.py"):
        run_sweep(spec, out, workers=1, executor=EditsSourceAtFirst(event, 1, 1, source), progress=False,
                  log=lambda *_: None)
    # an edit after the first job ended keeps it; one while it ran stops it (killed, or its receipt set aside)
    assert len(list(out.glob("runs/*/*/receipt.json"))) == (event == "done")
    log = [json.loads(line) for line in (out / "sweep-log.jsonl").read_text().splitlines()]
    assert sum("stopped: glm53's source changed" in (row.get("error") or "") for row in log) == (event == "started")
    (source / "sweep" / "specs" / "other.toml").write_text("a spec is read once, not watched")
    assert source_changes(source) == ["edited.py"]
    monkeypatch.setattr("glm53.sweep.executor._BASELINES", {})  # a new process: its fork server imports anew
    summary = run_sweep(spec, out, workers=2, executor=LocalExecutor(2, 1, source), progress=False,
                        log=lambda *_: None)
    assert summary["skipped"] == (event == "done") and summary["skipped"] + summary["done"] == 6
    assert not summary["failed"]


def _ctrl_c_as_in_a_shell() -> None:
    """The sweep's process takes SIGINT as a user's Ctrl-C would reach it: neither ignored nor blocked, whatever
    the test process inherited (an ignored or blocked SIGINT survives exec; in a full-suite run the sweep once
    finished untouched by the signal)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_sweep_completes_without_redoing_finished_jobs(tmp_path, how):
    # jobs of a few seconds each: at 30 steps (about 1 s on a fast CPU) the whole sweep could end between the first
    # receipt and the signal, and the test would see a finished sweep instead of an interrupted one
    spec_path = write_spec(tmp_path, steps=120)
    reference = tmp_path / "uninterrupted"
    run_sweep(load_spec(spec_path), reference, workers=2, progress=False, log=lambda *_: None)
    out = tmp_path / "interrupted"
    command = [sys.executable, "-m", "glm53", "sweep", str(spec_path), "--out", str(out), "--workers", "2",
               "--no-progress", "--no-analyze"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_ctrl_c_as_in_a_shell)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("runs/*/*/receipt.json")):
        time.sleep(0.05)
    finished = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*/receipt.json")}
    assert finished and proc.poll() is None, "the sweep ended before it could be interrupted"
    os.kill(proc.pid, how)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == (130 if how == signal.SIGINT else -signal.SIGKILL), output
    if how == signal.SIGINT:
        assert "rerun the same command" in output
    time.sleep(0.5)  # job processes die with the sweep (PR_SET_PDEATHSIG)
    summary = run_sweep(load_spec(spec_path), out, workers=2, progress=False, log=lambda *_: None)
    assert summary["skipped"] >= len(finished) and summary["skipped"] + summary["done"] == 6
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items()), "a finished job was redone"
    assert analyze(out) == analyze(reference)


@pytest.mark.slow
def test_a_finished_sweep_leaves_nothing_for_the_resource_tracker(tmp_path):
    # pretraining makes a (hidden) tqdm bar, whose default lock is a multiprocessing semaphore
    tiny = 'dim = 32\nlayers = 4\nheads = 4\nexpert_hidden = 48\nexperts = 4\nsparse_window = 8\nsparse_stride = 8\n'
    (tmp_path / "p.toml").write_text(
        'job = "pretrain"\nseeds = [1, 2]\ncheckpoints = [1]\nbaseline = "a"\n[base]\nsteps = 1\nbatch_size = 2\n'
        'sequence_length = 128\nmax_sequence_length = 160\ndev_max_new_tokens = 2\nprecision = "fp32"\n' + tiny
        + '[arms.a]\n')
    command = [sys.executable, "-m", "glm53", "sweep", str(tmp_path / "p.toml"), "--out", str(tmp_path / "s"),
               "--workers", "2", "--no-progress", "--no-analyze"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "leaked" not in done.stderr, done.stderr


@pytest.mark.slow
def test_a_failing_job_is_recorded_and_the_others_finish(tmp_path, capsys):
    # 40 tokens per row cannot hold an expression example (72-124 tokens): every job of that arm fails at run time
    spec = write_spec(tmp_path, extra='[arms.too-short]\ndata_order = "diverse-88"\nsequence_length = 40\n')
    out = tmp_path / "sweep"
    code = main(["sweep", str(spec), "--out", str(out), "--workers", "2", "--no-progress"])
    assert code == 1
    printed = capsys.readouterr().out
    assert "3 jobs failed" in printed and "longer than sequence_length" in printed
    assert len(list(out.glob("runs/too-short/*/error.json"))) == 3
    assert len(list(out.glob("runs/*/*/receipt.json"))) == 6
    assert json.loads((out / "analysis.json").read_text())["missing_jobs"] == [
        "too-short/seed-1", "too-short/seed-2", "too-short/seed-3"]


BAD_SPECS = {
    "unknown arm key": ('[arms.typo]\ndata_ordr = "diverse-88"\n', "unknown setting 'data_ordr'"),
    "unknown metric": ('', "unknown metric 'accuracy'"),
    "unknown job": ('', "unknown job kind 'train'"),
    "non-integer seed": ('', "seeds must be a list of integers"),
    "duplicate seed": ('', "seeds lists 2 more than once"),
    "invalid base": ('', "--lr must be > 0, got -1.0"),
    "arm name a path": ('[arms."../outside"]\n', "arm name '../outside' must be letters, digits"),
    "arm name a table cell": ('[arms."a|b"]\n', "arm name 'a|b' must be letters, digits"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_specs_are_refused_in_one_line_and_write_nothing(tmp_path, capsys, case):
    extra, expected = BAD_SPECS[case]
    text = TINY_SPEC.format(steps=4) + extra
    text = {"unknown metric": text.replace('"target_loss"]', '"accuracy"]'),
            "unknown job": text.replace('job = "expression-pretrain"', 'job = "train"'),
            "non-integer seed": text.replace("seeds = [1, 2, 3]", 'seeds = [1, "two"]'),
            "duplicate seed": text.replace("seeds = [1, 2, 3]", "seeds = [1, 2, 2]"),
            "invalid base": text.replace("batch_size = 4\n", "batch_size = 4\nlr = -1.0\n")}.get(case, text)
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    out = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err, err
    assert not out.exists()


@pytest.mark.slow
def test_empty_arms_seeds_flag_and_another_spec_in_the_folder(tmp_path, capsys):
    spec = tmp_path / "empty.toml"
    spec.write_text('job = "expression-pretrain"\nseeds = [1]\ncheckpoints = [1]\nbaseline = "a"\narms = {}\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "x")]) == 2
    assert "arms is empty" in capsys.readouterr().err
    assert main(["sweep", str(write_spec(tmp_path)), "--out", str(tmp_path / "x"), "--seeds", "1,x"]) == 2
    assert "--seeds must be comma-separated integers" in capsys.readouterr().err
    out = tmp_path / "sweep"
    run_sweep(load_spec(write_spec(tmp_path), seeds=[1]), out, workers=2, progress=False, log=lambda *_: None)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert main(["sweep", str(write_spec(tmp_path)), "--out", str(out), "--seeds", "1,2"]) == 2
    assert "holds another sweep" in capsys.readouterr().err
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


@pytest.mark.slow
def test_reuse_from_copies_the_jobs_another_sweep_already_ran(tmp_path, capsys):
    first = tmp_path / "first"
    run_sweep(load_spec(write_spec(tmp_path), seeds=[1, 2]), first, workers=2, progress=False, log=lambda *_: None)
    # another study: the same diverse-88 jobs under another arm name, and a new arm; seed 3 is new too
    other = TINY_SPEC.replace("[arms.repeated-8]", "[arms.blocked]").replace('"repeated-8"', '"diverse-blocked"')
    other = other.replace("[arms.diverse-88]", "[arms.diverse]")
    other = other.replace('baseline = "diverse-88"', 'baseline = "diverse"')
    (tmp_path / "other.toml").write_text(other.format(steps=4))
    spec, out, lines = load_spec(tmp_path / "other.toml"), tmp_path / "second", []
    summary = run_sweep(spec, out, workers=2, progress=False, log=lines.append, reuse_from=[first])
    assert summary["skipped"] == 2 and summary["done"] == 4  # diverse seeds 1 and 2 copied; 4 jobs ran
    assert sorted(line for line in lines if line.startswith("reused")) == [
        f"reused: diverse/seed-{s} from {first / 'runs' / 'diverse-88' / f'seed-{s}'}" for s in (1, 2)]
    copied, original = receipt(out, "diverse", 1), receipt(first, "diverse-88", 1)
    assert copied["arm"] == "diverse" and copied["reused_from"] == str((first / "runs/diverse-88/seed-1").resolve())
    assert copied["metrics"] == original["metrics"]
    assert (out / "runs/diverse/seed-1/log.txt").stat().st_nlink == 2  # hard-linked, not copied, on one filesystem
    # the copy is what running it would have given: seed 3 ran here, and equals a fresh run of it elsewhere
    fresh = tmp_path / "fresh"
    run_sweep(load_spec(write_spec(tmp_path), seeds=[3]), fresh, workers=1, progress=False, log=lambda *_: None)
    assert receipt(out, "diverse", 3)["metrics"] == receipt(fresh, "diverse-88", 3)["metrics"]
    # the same arms and seeds with other checkpoints are other jobs: nothing is reused
    later_spec = TINY_SPEC.format(steps=4).replace("checkpoints = [2, 4]", "checkpoints = [3, 4]")
    (tmp_path / "later.toml").write_text(later_spec)
    later = load_spec(tmp_path / "later.toml")
    assert reuse_finished(later, plan_jobs(later, tmp_path / "later"), [first], log=lambda *_: None) == 0
    assert main(["sweep", str(tmp_path / "other.toml"), "--out", str(tmp_path / "x"), "--reuse-from",
                 str(tmp_path / "nothing")]) == 2
    assert "not a sweep folder" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["sweep", "rl-screen", "--out", str(tmp_path / "x"), "--reuse-from", str(first)]) == 2
    assert "has a [setup] job" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["released-attention", "released-attention-100", "released-streams"])
def test_shipped_architecture_specs_load(name):
    spec = load_spec(name)
    assert spec.job == "pretrain-eval" and spec.baseline == "reference" and len(spec.seeds) >= 1


def test_shipped_pretraining_data_spec_loads():
    spec = load_spec("pretraining-data")
    assert "pretraining-data" in shipped_specs()
    assert list(spec.arms) == ["repeated-8", "diverse-88", "diverse-blocked", "curriculum-8-to-88"]
    assert spec.seeds == tuple(range(11, 111, 11)) and spec.checkpoints == (50, 100, 200)
    assert ("diverse-88", "repeated-8") in spec.comparisons and ("diverse-blocked", "diverse-88") in spec.comparisons


@pytest.mark.slow
def test_pretrain_and_eval_job_kinds(tmp_path):
    tiny = 'dim = 32\nlayers = 4\nheads = 4\nexpert_hidden = 48\nexperts = 4\nsparse_window = 8\nsparse_stride = 8\n'
    (tmp_path / "p.toml").write_text(
        'job = "pretrain"\nseeds = [1]\ncheckpoints = [2]\nmetrics = ["dev_pass_rate", "train_loss"]\n'
        'baseline = "a"\n[base]\nsteps = 2\nbatch_size = 2\nsequence_length = 128\nmax_sequence_length = 160\n'
        'dev_max_new_tokens = 4\nprecision = "fp32"\n' + tiny + '[arms.a]\nlr = 1e-3\n[arms.b]\nlr = 2e-3\n')
    out = tmp_path / "p"
    assert run_sweep(load_spec(tmp_path / "p.toml"), out, workers=2, progress=False, log=lambda *_: None)["done"] == 2
    r = receipt(out, "a", 1)
    assert set(r["metrics"]) == {"0", "2"} and 0 <= r["metrics"]["2"]["dev_pass_rate"] <= 1
    assert_run_receipt_exists(out, "a", 1)
    # the record kept without checkpoints (small enough to commit) continues as the same sweep: nothing reruns
    kept = tmp_path / "kept"
    assert keep_without_checkpoints(out, kept) == 2
    assert list(out.rglob("checkpoint-*")) and not list(kept.rglob("checkpoint-*"))
    assert receipt(kept, "b", 1) == receipt(out, "b", 1)
    assert_run_receipt_exists(kept, "b", 1)
    assert run_sweep(load_spec(tmp_path / "p.toml"), kept, workers=1, progress=False,
                     log=lambda *_: None)["skipped"] == 2
    small = tmp_path / "kept-small"  # large files gzipped, the receipts plain: still the same finished sweep
    assert keep_without_checkpoints(out, small, compress_over=1) == 2
    assert receipt(small, "b", 1) == receipt(out, "b", 1)
    assert (small / "runs" / "b" / "seed-1" / "run" / "training-receipt.json.gz").is_file()
    assert run_sweep(load_spec(tmp_path / "p.toml"), small, workers=1, progress=False,
                     log=lambda *_: None)["skipped"] == 2
    with pytest.raises(ValueError, match="sweep folder .*not a sweep folder") as refused:
        keep_without_checkpoints(tmp_path / "runs-only", tmp_path / "kept2")
    assert "--reuse-from" not in str(refused.value) and not (tmp_path / "kept2").exists()
    checkpoint = out / "runs" / "a" / "seed-1" / "run" / "checkpoint-0002"
    (tmp_path / "e.toml").write_text(
        f'job = "eval"\nseeds = [5, 6]\nbaseline = "t35"\n[base]\ncheckpoint = "{checkpoint}"\nper_family = 1\n'
        'families = "increment,double"\nsamples = 2\nmax_new_tokens = 4\n[arms.t35]\ntemperature = 0.35\n'
        '[arms.t80]\ntemperature = 0.8\n')
    out = tmp_path / "e"
    assert run_sweep(load_spec(tmp_path / "e.toml"), out, workers=2, progress=False, log=lambda *_: None)["done"] == 4
    result = analyze(out, charts=False)
    assert result["checkpoints"] == ["eval"] and result["arms"]["t80"]["eval"]["pass_rate"]["n"] == 2
    (tmp_path / "r.toml").write_text(
        f'job = "rl"\nseeds = [3]\ncheckpoints = [2]\nmetrics = ["dev_exact_rate", "dev_pass_at_1"]\nbaseline = "loo"\n'
        f'[base]\ninit = "{checkpoint}"\ngroups = 2\ngroup_size = 2\ngroups_per_step = 2\nfamilies = "increment"\n'
        'tasks_per_family = 1\nmax_new_tokens = 4\ndev_per_family = 1\ndev_samples = 1\ntemperature = 1.0\n'
        '[arms.loo]\n[arms.grpo]\nadvantage_baseline = "group-mean"\nreward_scaling = "group-std"\n')
    rl_out = tmp_path / "r"
    assert run_sweep(load_spec(tmp_path / "r.toml"), rl_out, workers=2, progress=False,
                     log=lambda *_: None)["done"] == 2
    assert set(receipt(rl_out, "grpo", 3)["metrics"]) == {"0", "2"}
    assert_run_receipt_exists(rl_out, "grpo", 3)
    assert receipt(rl_out, "grpo", 3)["settings"]["reward_scaling"] == "group-std"
    recorded = json.loads((checkpoint / "metadata.json").read_text())["weights_sha256"]
    assert receipt(out, "t35", 5)["checkpoint_sha256"] == recorded == r["metrics"]["2"]["weights_sha256"]


TINY_MODEL = 'dim = 32\nlayers = 4\nheads = 4\nexpert_hidden = 48\nexperts = 4\nsparse_window = 8\nsparse_stride = 8\n'
RL_EVAL_SPEC = """
name = "tiny-rl"
job = "rl-eval"
seeds = [3, 4]
metrics = ["greedy_pass_at_1", "sampled_pass_at_1", "zero_variance_fraction"]
baseline = "rloo"
[setup]
job = "pretrain"
seed = 7
checkpoints = [2]
steps = 2
batch_size = 2
sequence_length = 128
max_sequence_length = 160
dev_max_new_tokens = 4
precision = "fp32"
{model}
[base]
init = "{{setup}}/run/checkpoint-0002"
groups = 2
group_size = 2
groups_per_step = 1
families = "increment,double"
tasks_per_family = 1
max_new_tokens = 4
temperature = 1.0
eval_per_family = 2
eval_samples = 2
[arms.rloo]
[arms.grpo]
advantage_baseline = "group-mean"
reward_scaling = "group-std"
"""


@pytest.mark.slow
def test_an_rl_eval_job_trains_on_its_spec_s_task_file(tmp_path):
    # the sweep's job passes no task list to rl_train: the config's tasks_file must be read there, not ignored
    tasks_file = tmp_path / "mine.jsonl"
    assert main(["tasks", "export", "--split", "rl", "--per-family", "2", "--families", "square,reverse",
                 "--out", str(tasks_file)]) == 0
    path = tmp_path / "rl.toml"
    path.write_text(RL_EVAL_SPEC.format(model=TINY_MODEL).replace('families = "increment,double"\n',
                                                                  f'tasks_file = "{tasks_file}"\n'))
    spec = load_spec(path, [3])
    out = tmp_path / "rl"
    assert run_sweep(replace(spec, arms={"rloo": spec.arms["rloo"]}), out, workers=1, progress=False,
                     log=lambda *_: None)["done"] == 1
    run = out / "runs" / "rloo" / "seed-3" / "run"
    exported = {json.loads(line)["task_id"] for line in tasks_file.read_text().splitlines()}
    assert set(json.loads((run / "schedule.json").read_text())) <= exported
    assert {o["family"] for o in receipt(out, "rloo", 3)["tasks"].values()} == {"square", "reverse"}


@pytest.mark.slow
def test_setup_job_runs_once_and_rl_eval_arms_start_from_it(tmp_path):
    path = tmp_path / "rl.toml"
    path.write_text(RL_EVAL_SPEC.format(model=TINY_MODEL))
    spec = load_spec(path)
    out = tmp_path / "rl"
    summary = run_sweep(spec, out, workers=2, progress=False, log=lambda *_: None)
    assert summary["done"] == 4 and not summary["failed"]
    setup = json.loads((out / "setup" / "receipt.json").read_text())
    start_sha = setup["metrics"]["2"]["weights_sha256"]
    for arm in ("rloo", "grpo"):
        r = receipt(out, arm, 3)
        assert r["initial_sha256"] == start_sha and r["sweep_settings"]["init"] == "{setup}/run/checkpoint-0002"
        assert r["settings"]["init"] == str((out / "setup").resolve() / "run" / "checkpoint-0002")
        assert len(r["tasks"]) == 4 and {o["family"] for o in r["tasks"].values()} == {"increment", "double"}
        assert r["curves"]["reward_mean"][-1][0] == 4  # x: rollouts sampled (2 groups of 2)
        assert not list((out / "runs" / arm / "seed-3" / "run").glob("checkpoint-*/model.safetensors"))
        assert_run_receipt_exists(out, arm, 3)
    result = analyze(out)
    c = result["comparisons"][0]
    assert c["arm"] == "grpo" and len(c["seed_task_bootstrap95"]) == 2
    assert set(result["curves"]["rloo"]) == {"reward_mean", "zero_variance_fraction"}
    assert "charts/training-curves.png" in result["charts"] and (out / "charts" / "training-curves.png").is_file()
    mtime = (out / "setup" / "receipt.json").stat().st_mtime
    again = run_sweep(spec, out, workers=2, progress=False, log=lambda *_: None)
    assert again["skipped"] == 4 and (out / "setup" / "receipt.json").stat().st_mtime == mtime

    # a second study shares the first one's start (the larger-budget follow-up) instead of pretraining again
    bigger = tmp_path / "bigger.toml"
    bigger.write_text(RL_EVAL_SPEC.format(model=TINY_MODEL).replace("groups = 2\n", "groups = 4\n")
                      .replace("seeds = [3, 4]", "seeds = [3]"))
    out2 = tmp_path / "bigger"
    done = run_sweep(load_spec(bigger), out2, workers=2, progress=False, log=lambda *_: None, setup_from=out)
    assert done["done"] == 2 and not (out2 / "setup").exists()
    assert receipt(out2, "grpo", 3)["initial_sha256"] == start_sha
    # same seeds, same results: the same spec again, from the same start, gives the same receipts (timings aside)
    out3 = tmp_path / "again"
    run_sweep(spec, out3, workers=2, progress=False, log=lambda *_: None, setup_from=out)
    for arm in ("rloo", "grpo"):
        first, second = receipt(out, arm, 4), receipt(out3, arm, 4)
        for key in ("metrics", "tasks", "curves", "final_weights_sha256", "task_outcomes"):
            assert first[key] == second[key], key
    other = tmp_path / "other.toml"
    other.write_text(RL_EVAL_SPEC.format(model=TINY_MODEL).replace("seed = 7", "seed = 8"))
    with pytest.raises(ValueError, match="is not this spec's"):
        run_sweep(load_spec(other), tmp_path / "other", progress=False, log=lambda *_: None, setup_from=out)


def test_setup_mark_without_a_setup_job_is_refused(tmp_path):
    path = tmp_path / "rl.toml"
    text = RL_EVAL_SPEC.format(model=TINY_MODEL)
    path.write_text(text[:text.index("[setup]")] + text[text.index("[base]"):])
    with pytest.raises(ValueError, match="refers to {setup} but the spec has no"):
        load_spec(path)


@pytest.mark.slow
def test_pretrain_eval_job_scores_each_architecture_switch(tmp_path):
    (tmp_path / "a.toml").write_text(
        'job = "pretrain-eval"\nseeds = [1]\ncheckpoints = [2, 3]\nbaseline = "reference"\n'
        'metrics = ["train_loss", "greedy_pass_at_1", "train_tokens_per_second", "decode_tokens_per_second", '
        '"indexer_loss"]\n[base]\nsteps = 3\nbatch_size = 2\nsequence_length = 128\nmax_sequence_length = 160\n'
        'precision = "fp32"\n'
        'dev_max_new_tokens = 4\neval_at = [2]\neval_per_family = 1\neval_max_new_tokens = 4\nloss_window = 2\n'
        + TINY_MODEL + 'indexer_top_k = 4\n[arms.reference]\n'
        '[arms.released]\nlinear_attention = "kda"\nsparse_selection = "indexer"\nposition = "none"\n'
        'indexer_warmup_steps = 1\nresidual = "mhc"\nrouter = "sigmoid-bias"\ntie_embeddings = false\nmtp_depth = 1\n'
        '[[comparisons]]\narm = "released"\nagainst = "reference"\n')
    out = tmp_path / "a"
    assert run_sweep(load_spec(tmp_path / "a.toml"), out, workers=2, progress=False, log=lambda *_: None)["done"] == 2
    for arm in ("reference", "released"):
        r = receipt(out, arm, 1)
        curve = [json.loads(line) for line in (out / "runs" / arm / "seed-1" / "run" / "train_log.jsonl").open()]
        assert r["metrics"]["3"]["train_loss"] == pytest.approx((curve[1]["loss"] + curve[2]["loss"]) / 2)
        assert 0 <= r["metrics"]["2"]["greedy_pass_at_1"] <= 1 and len(r["task_outcomes"]["greedy_pass_at_1"]) == 8
        assert r["metrics"]["2"]["decode_tokens_per_second"] > 0 and r["metrics"]["3"]["train_tokens_per_second"] > 0
        assert (r["metrics"]["3"]["indexer_loss"] > 0) == (arm == "released")
        assert r["metrics"]["3"]["expert_load_cv"] >= 0
        assert ("mtp_acceptance_rate" in r["metrics"]["2"]) == (arm == "released")
        assert_run_receipt_exists(out, arm, 1)
        record = json.loads((out / "runs" / arm / "seed-1" / r["eval_records"]["2"]).read_text())
        assert record["checkpoint_sha256"] == r["metrics"]["2"]["weights_sha256"]
        assert {t["task_id"]: float(t["passed"] > 0) for t in record["tasks"]} == r["task_outcomes"]["greedy_pass_at_1"]
        assert all(t["prompt"] and len(t["samples"]) == 1 and "completion" in t["samples"][0] for t in record["tasks"])
    speculative = receipt(out, "released", 1)["metrics"]["2"]
    assert speculative["speculative_equal"] == 1.0 and speculative["speculative_speedup"] > 0
    assert receipt(out, "released", 1)["settings"]["model"]["linear_attention"] == "kda"
    result = analyze(out, charts=False)
    assert result["arms"]["released"]["2"]["greedy_pass_at_1"]["n"] == 1


def test_a_resumed_sweep_refuses_a_stream_file_edited_since_its_jobs_ran(tmp_path, monkeypatch):
    """A job's settings name its stream file, not its content: an edit between sessions must not pair two streams.
    The file is the one the training receipt records (kept gzipped or not), whatever the spec called the setting."""
    import gzip

    from glm53.data.broad.stream_primitives import file_sha256
    from glm53.sweep.executor import Job
    from glm53.sweep.runner import check_stream_files

    stream = tmp_path / "mine.toml"
    stream.write_text((Path("glm53/data/broad/examples/extra_primitives.toml")).read_text())

    def finished(arm, given, gzipped=False):
        job = Job(arm, 1, str(tmp_path / "runs" / arm / "seed-1"), "pretrain-splits", {"stream-primitives": given},
                  (4,))
        (Path(job.dir) / "run").mkdir(parents=True)
        (Path(job.dir) / "receipt.json").write_text(json.dumps({"run_receipt": "run/training-receipt.json"}))
        held = json.dumps({"stream_primitives": {"given": given, "path": str(stream), "sha256": file_sha256(stream)}}
                          if given else {})
        if gzipped:
            with gzip.open(Path(job.dir) / "run" / "training-receipt.json.gz", "wt") as f:
                f.write(held)
        else:
            (Path(job.dir) / "run" / "training-receipt.json").write_text(held)
        return job

    jobs = [finished("wider", str(stream)), finished("kept", str(stream), gzipped=True), finished("builtin", "")]
    check_stream_files(jobs)  # the content they read: goes on
    stream.write_text(stream.read_text() + "\n# an edit\n")
    for job in jobs[:2]:
        with pytest.raises(ValueError, match=rf"{job.arm}/seed-1 read --stream-primitives .* restore the file"):
            check_stream_files([job, jobs[2]])
    check_stream_files([jobs[2]])  # the built-in grammar has no file to check
    stream.unlink()
    with pytest.raises(ValueError, match=r"wider/seed-1 read --stream-primitives .*mine.toml\), which is not there"):
        check_stream_files(jobs)
