"""Settings the machine cannot hold, and values that mean nothing, refused up front (issue: a newcomer's harmful
acceptances): memory by an estimate tied to the memory available (never a fixed cap), threads by the cores, tiny
temperatures by what float32 can divide by, transformers' keywords to GLM53.generate, and the interactive REPL's
exit status. Each refusal is one stderr line naming the flag, exit code 2, and nothing written.

Memory is pinned in these tests (`available_memory_bytes` monkeypatched), so each estimate is compared with a known
amount and the numbers in the lines do not depend on the machine running them."""

import io
import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint
from glm53.cli import main
from glm53.data.tasks import frozen_tasks, write_tasks
from glm53.decode.sampling import MIN_TEMPERATURE, Sampling
from glm53.runtime import memory
from glm53.runtime.config import available_cores

from .test_bad_inputs import TINY_FLAGS
from .tiny import TINY

MIB, GIB = 2 ** 20, 2 ** 30


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny checkpoint (a context of 160, as the task prompts need) and a task file."""
    root = tmp_path_factory.mktemp("bounds")
    save_checkpoint(root / "good", GLM53(ModelConfig(**{**TINY, "max_sequence_length": 160})), {"step": 0})
    write_tasks(frozen_tasks("confirm", 1, "double"), root / "tasks.jsonl")
    return {"root": str(root), "good": str(root / "good"), "tasks": str(root / "tasks.jsonl")}


def pin_memory(monkeypatch, available: int) -> None:
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: available)


def refused(argv: list[str], capsys) -> str:
    """The one stderr line of a refused command (exit code 2, no traceback)."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- 1. memory, by an estimate against what is available

MEMORY_CASES = [
    # (name, argv with {placeholders}, memory available, what the line says)
    ("a pretraining batch", ["pretrain", "--out", "{new}", "--steps", "1", "--batch-size", "100", *TINY_FLAGS],
     64 * MIB,
     "--batch-size 100 needs about 175.4 MiB of memory (the activations of rows of 128 tokens, at least 1.8 MiB a row "
     "for this model), more than the 64.0 MiB this machine has available; give --batch-size 18 or less "
     "(--grad-accumulation K takes a step of K x --batch-size rows in the memory of one, or a shorter "
     "--sequence-length)"),
    ("an rl group", ["rl", "--init", "{good}", "--out", "{new}", "--group-size", "200000",
                     "--accept-partial-isolation"], 8 * GIB,
     "--group-size 200,000 needs about 74.6 GiB of memory (the decoding cache of 3,200,000 rows sampled at once, at "
     "least 24.5 KiB a row of 49 tokens for this model), more than the 8.0 GiB this machine has available; give "
     "--group-size 10,720 or less (each step samples --groups-per-step 16 x --group-size rows at once: fewer "
     "--groups-per-step also fit)"),
    ("rl dev samples", ["rl", "--init", "{good}", "--out", "{new}", "--dev-samples", "1000000",
                        "--accept-partial-isolation"], 1 * GIB, "--dev-samples 1,000,000 needs about 23.3 GiB"),
    ("samples of a prompt", ["generate", "--checkpoint", "{good}", "--prompt", "def f(x):", "--samples", "1000000",
                             "--temperature", "0.5"], 8 * GIB,
     "--samples 1,000,000 needs about 26.5 GiB of memory (the decoding cache of 1,000,000 rows sampled at once, at "
     "least 27.8 KiB a row of 58 tokens for this model), more than the 8.0 GiB this machine has available; give "
     "--samples 150,721 or less"),
    ("samples of a task file", ["generate", "--checkpoint", "{good}", "--tasks", "{tasks}", "--samples", "1000000",
                                "--out", "{new}.jsonl"], 1 * GIB, "--samples 1,000,000 needs about 23.3 GiB"),
    ("eval samples", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--samples", "1000000", "--out",
                      "{new}.json", "--accept-partial-isolation"], 1 * GIB, "--samples 1,000,000 needs about 23.3 GiB"),
    ("a main job's pretraining batch", ["run", "--preset", "quick", "--out", "{new}", "--pretrain.batch-size",
                                        "20000"], 16 * GIB,
     "--pretrain.batch-size 20,000 needs about 532.3 GiB of memory (the activations of rows of 128 tokens, at least "
     "27.3 MiB a row for this model), more than the 16.0 GiB this machine has available; give "
     "--pretrain.batch-size 300 or less (--pretrain.grad-accumulation K takes"),
    ("a main job's rl group", ["run", "--preset", "quick", "--out", "{new}", "--rl.group-size", "200000"], 16 * GIB,
     "--rl.group-size 200,000 needs about"),
    ("a speedrun's batch", ["speedrun", "--out", "{new}", "--recipe", "e4", "--pretrain.batch-size", "100000"],
     16 * GIB, "--pretrain.batch-size 100,000 needs about 2,287.5 GiB"),
]


@pytest.mark.parametrize("name, argv, available, message", MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_a_setting_the_memory_cannot_hold_is_refused_before_any_work(inputs, tmp_path, monkeypatch, capsys, name,
                                                                     argv, available, message):
    pin_memory(monkeypatch, available)
    values = {**inputs, "new": str(tmp_path / "out")}
    err = refused([a.format(**values) for a in argv], capsys)
    assert message in err, err
    assert list(tmp_path.iterdir()) == [], name  # nothing written, not even the run folder


def test_the_bound_is_the_machines_memory_not_a_fixed_cap():
    from glm53.train.pretrain_config import PretrainConfig

    big = PretrainConfig(out="x", batch_size=2000)  # the reference model: 2,000 rows of 128 tokens
    assert memory.training_memory_problem(big, available=16 * GIB).startswith("--batch-size 2,000 needs about 53.2")
    assert memory.training_memory_problem(big, available=512 * GIB) is None  # a big machine takes it
    assert memory.training_memory_problem(PretrainConfig(out="x"), available=4 * GIB) is None  # the default fits
    # --grad-accumulation keeps a step's rows in the memory of one micro-batch: the way out the line offers
    assert memory.training_memory_problem(PretrainConfig(out="x", batch_size=100, grad_accumulation=20),
                                          available=4 * GIB) is None


def test_torchrun_ranks_on_one_machine_share_its_memory(monkeypatch):
    from glm53.train.pretrain_config import PretrainConfig

    cfg = PretrainConfig(out="x", batch_size=400)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two machines of two ranks: half the rows on this one
    half = memory.training_memory_problem(cfg, available=4 * GIB)
    assert "needs about 5.3 GiB" in half, half
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert "needs about 10.6 GiB" in memory.training_memory_problem(cfg, available=4 * GIB)


def test_available_memory_is_read_from_the_system():
    available = memory.available_memory_bytes()
    assert available is None or 0 < available <= 2 ** 50


def test_the_floors_stay_below_what_was_measured():
    """The constants against the measurements they are floors of (see runtime/memory.py)."""
    reference = ModelConfig()
    assert memory.training_bytes_per_token(reference) < 275 * 1024  # bf16's 275 KiB a token, fp32's 440
    assert memory.decode_bytes_per_row(reference, 14) < 562 * 1024  # 2,000 rows of 14 tokens: 562 KiB a row
    assert memory.decode_bytes_per_row(ModelConfig(**TINY), 57) < 40 * 1024  # 20,000 rows of 57: 40 KiB a row


# ---------------------------------------------------------------- 2. threads and workers, by the cores

def test_a_speedrun_with_more_threads_than_cores_is_refused(tmp_path, capsys):
    cores = available_cores()
    err = refused(["speedrun", "--out", str(tmp_path / "s"), "--threads", str(cores + 1)], capsys)
    assert err == (f"glm53 speedrun: error: --threads {cores + 1} is more than this machine's {cores} cores (threads "
                   f"beyond the cores wait on each other and slow every other job); give at most {cores} (0: "
                   "automatic), or add --force-threads")
    assert list(tmp_path.iterdir()) == []


def test_sweep_workers_times_threads_past_the_cores_is_refused_naming_both(tmp_path, capsys):
    cores = available_cores()
    err = refused(["sweep", "pretraining-data", "--out", str(tmp_path / "s"), "--workers", str(cores + 1)], capsys)
    assert (f"--workers {cores + 1} x --threads-per-worker 1 is {cores + 1} torch threads, more than this machine's "
            f"{cores} cores" in err and f"give --workers {cores} or fewer" in err and "--force-threads" in err), err
    err = refused(["sweep", "pretraining-data", "--plan", "--threads-per-worker", str(cores + 1)], capsys)
    assert f"--threads-per-worker {cores + 1} is more than this machine's {cores} cores" in err
    assert list(tmp_path.iterdir()) == []
    # --force-threads lets it through (the plan then says what the oversubscription costs)
    assert main(["sweep", "pretraining-data", "--plan", "--workers", str(cores + 1), "--force-threads"]) == 0
    assert "exceed the" in capsys.readouterr().out


def test_sweep_threads_is_not_taken_for_threads_per_worker(tmp_path, capsys):
    """argparse takes a prefix of a flag for the flag: `--threads 64` silently became --threads-per-worker 64."""
    err = refused(["sweep", "pretraining-data", "--out", str(tmp_path / "s"), "--threads", "64"], capsys)
    assert err.startswith("glm53 sweep: error: --threads 64: a sweep runs --workers jobs at once, each with "
                          "--threads-per-worker torch threads; give those two instead"), err


def test_sweep_workers_are_bounded_by_memory_too():
    from glm53.sweep.commands import workers_problem

    assert workers_problem(8, 1, True, available=1 * GIB) == (
        "--workers 8 needs about 2.0 GiB of memory (a process of its own a job, each holding at least torch's 256 MiB "
        "before its model), more than the 1.0 GiB this machine has available; give --workers 2 or less")
    assert workers_problem(2, 1, True, available=64 * GIB) is None
    assert workers_problem(None, 1, False, available=1) is None  # the default: cores / --threads-per-worker


# ---------------------------------------------------------------- 4. temperatures float32 cannot divide by

@pytest.mark.parametrize("temperature", [1e-300, 1e-30, 1e-4])
def test_a_tiny_temperature_is_refused_by_meaning(temperature):
    with pytest.raises(ValueError, match=rf"--temperature {temperature:g} is too small to sample at: the scores "
                                         r"divided by it overflow float32 \(inf\).*give 0 for greedy decoding, or a "
                                         r"temperature of at least 0.001"):
        Sampling(temperature=temperature)
    assert Sampling(temperature=0.0).temperature == 0 and Sampling(temperature=MIN_TEMPERATURE)


def test_a_tiny_temperature_is_refused_wherever_it_is_a_setting(inputs, tmp_path, capsys):
    from glm53.sweep.jobs import FinalEvalConfig
    from glm53.train.rl_config import RLConfig

    err = refused(["generate", "--checkpoint", inputs["good"], "--prompt", "x", "--temperature", "1e-300"], capsys)
    assert "--temperature 1e-300 is too small to sample at" in err and "weights" not in err, err
    err = refused(["rl", "--init", inputs["good"], "--out", str(tmp_path / "r"), "--temperature", "1e-5"], capsys)
    assert "--temperature 1e-05 is too small to sample at" in err
    err = refused(["eval", "--checkpoint", inputs["good"], "--tasks", inputs["tasks"], "--temperature", "1e-9",
                   "--samples", "2", "--out", str(tmp_path / "e.json")], capsys)
    assert "--temperature 1e-09 is too small to sample at" in err
    with pytest.raises(ValueError, match="--dev-temperature|--temperature 1e-07 is too small"):
        RLConfig(init="x", out="y", dev_temperature=1e-7)
    with pytest.raises(ValueError, match="eval_temperature 1e-07 is too small to sample at"):
        FinalEvalConfig(eval_temperature=1e-7)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- 5. GLM53.generate with transformers' keywords

@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return GLM53(ModelConfig(**TINY)).eval()


def test_generate_takes_transformers_greedy_keywords(tiny_model):
    greedy = tiny_model.generate(["def f(x):", "def g(y):"], max_new_tokens=6)
    for options in ({"temperature": 0.0}, {"do_sample": False}, {"do_sample": False, "top_k": 50}):
        assert tiny_model.generate(["def f(x):", "def g(y):"], max_new_tokens=6, **options) == greedy, options


def test_generate_takes_transformers_sampling_keywords(tiny_model):
    def tokens(**options):
        return [g.token_ids for g in tiny_model.generate("def f(x):", max_new_tokens=8, seed=3, samples=3, **options)]

    assert tokens(do_sample=True) == tokens(sampling=Sampling(temperature=1.0))  # transformers' default temperature
    assert tokens(temperature=0.7) == tokens(sampling=Sampling(temperature=0.7))
    assert tokens(do_sample=True, temperature=0.7, top_k=5, top_p=0.9) == tokens(
        sampling=Sampling(temperature=0.7, top_k=5, top_p=0.9))
    assert tokens(do_sample=True, top_k=0, top_p=1.0) == tokens(sampling=Sampling(temperature=1.0))  # no filter


@pytest.mark.parametrize("options, error, message", [
    ({"num_beams": 4}, TypeError, "GLM53.generate() got an unexpected keyword argument 'num_beams'; it takes prompts, "
                                  "sampling, max_new_tokens, stop, stream and by keyword samples, seed, generator, "
                                  "cache, tokenizer, temperature, top_k, top_p, do_sample"),
    ({"do_sample": False, "temperature": 0.7}, ValueError, "do_sample=False decodes greedily, but temperature=0.7"),
    ({"do_sample": True, "temperature": 0.0}, ValueError, "do_sample=True samples, but temperature=0.0 is greedy"),
    ({"sampling": Sampling(), "temperature": 0.5}, ValueError, "give either sampling= or temperature="),
    ({"temperature": 1e-300}, ValueError, "--temperature 1e-300 is too small to sample at"),
    ({"do_sample": "yes"}, ValueError, "do_sample must be True or False"),
    ({"samples": 10 ** 9, "temperature": 0.5}, ValueError, "samples 1,000,000,000 needs about"),
])
def test_generate_refuses_what_it_cannot_honour_in_one_line(tiny_model, options, error, message):
    with pytest.raises(error) as caught:
        tiny_model.generate("def f(x):", max_new_tokens=4, **options)
    assert message in str(caught.value) and len(str(caught.value).splitlines()) == 1, str(caught.value)


# ---------------------------------------------------------------- 6. the interactive REPL's exit status

def test_a_failed_prompt_is_said_and_the_session_goes_on_then_exits_1(inputs, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("def f(x):\n\n" + "x" * 400 + "\n\ndef g(y):\n"))
    assert main(["generate", "--checkpoint", inputs["good"], "--interactive", "--max-new-tokens", "4"]) == 1
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2  # both good prompts were answered, around the one that failed
    assert "leaves no room" in err and err.strip().splitlines()[-1] == (
        "glm53 generate: 1 of 3 prompts failed (said above); exit status 1")
    monkeypatch.setattr(sys, "stdin", io.StringIO("def f(x):\n\ndef g(y):\n"))
    assert main(["generate", "--checkpoint", inputs["good"], "--interactive", "--max-new-tokens", "4"]) == 0
    assert "failed" not in capsys.readouterr().err


def test_run_repl_counts_what_failed(tiny_model):
    from glm53.decode.interactive import run_repl

    stdout, stderr = io.StringIO(), io.StringIO()
    done, failed = run_repl(tiny_model, Sampling(max_new_tokens=3), torch.Generator().manual_seed(0), None,
                            io.StringIO("def f(x):\n\n" + "y" * 100 + "\n"), stdout, stderr)
    assert (done, failed) == (1, 1) and "1 of 2 prompts failed" in stderr.getvalue()


# ---------------------------------------------------------------- more of the same kind

def test_more_newcomer_inputs_are_refused_in_one_line(inputs, tmp_path, capsys):
    good = inputs["good"]
    err = refused(["generate", "--checkpoint", good, "--prompt", "x", "--seed", str(10 ** 23)], capsys)
    assert "--seed must lie in [0, 4294967295], got 100000000000000000000000" in err  # was: Overflow when unpacking
    assert "--seed must lie in" in refused(["generate", "--checkpoint", good, "--prompt", "x", "--seed", "-1"], capsys)
    err = refused(["generate", "--checkpoint", good, "--prompt", "x", "--samples", "3", "--temperature", "0"], capsys)
    assert "several --samples of a prompt need a --temperature > 0" in err  # three identical greedy copies before
    (tmp_path / "empty.toml").write_text("# nothing yet\n")
    err = refused(["pretrain", "--out", str(tmp_path / "p"), "--config", str(tmp_path / "empty.toml")], capsys)
    assert "--config" in err and "empty.toml holds no settings" in err  # it ran the defaults before
    assert "is a folder; give the JSON file" in refused(["compare", str(tmp_path), str(tmp_path)], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.toml"]


def test_several_samples_of_a_prompt_are_sampled_unless_a_temperature_is_given(inputs, capsys):
    assert main(["generate", "--checkpoint", inputs["good"], "--prompt", "def f(x):", "--samples", "3",
                 "--max-new-tokens", "6", "--stop", "eos", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and len({tuple(r["token_ids"]) for r in rows}) > 1


def test_a_completion_holding_a_lone_surrogate_is_printed(inputs, monkeypatch, capsys):
    """The byte tokenizer decodes the bytes of a lone surrogate exactly; printing one failed after the work."""
    from glm53.decode import text_generation
    from glm53.decode.interactive import printable

    assert printable("a\udaedb") == "a\ufffd\ufffd\ufffdb" and printable("café") == "café"
    made = [text_generation.Generation("x", "\udaed!", [1], False)]
    monkeypatch.setattr(text_generation, "generate_text", lambda *args, **kwargs: made)
    import sys

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))  # strict, as a terminal's
    assert main(["generate", "--checkpoint", inputs["good"], "--prompt", "x"]) == 0
