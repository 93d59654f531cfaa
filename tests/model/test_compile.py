"""The model under torch.compile: a training forward traces into one graph (no graph break) and a step of one shape
compiles once; the grouped experts that make this possible equal the loop they replace. Traced with Dynamo and a
counting backend (no Inductor code generation), so the tests take seconds."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.model import moe

TINY = ModelConfig(dim=64, layers=4, heads=4, vocab_size=260, max_sequence_length=64, expert_hidden=64)
DENSE = dataclasses.replace(TINY, experts=1, top_k=1, shared_experts=0)


def _loss(model, ids, bf16: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(ids[:, :-1])
    logits = out if torch.is_tensor(out) else out[0]
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())


@pytest.mark.parametrize("config,bf16", [(TINY, True), (DENSE, False), (DENSE, True)],
                         ids=["routed-bf16", "dense-fp32", "dense-bf16"])
def test_a_training_forward_traces_without_a_graph_break(config, bf16):
    if not moe.HAS_GROUPED_MM and config.experts > 1:
        pytest.skip("routed experts compile whole with torch's grouped_mm (torch >= 2.9)")
    torch.manual_seed(0)
    model = GLM53(config)
    ids = torch.randint(4, config.vocab_size, (2, 33))
    explained = torch._dynamo.explain(lambda x: _loss(model, x, bf16))(ids)
    assert explained.graph_break_count == 0, [str(b.reason)[:200] for b in explained.break_reasons]
    assert explained.graph_count == 1


def test_a_compiled_fp32_step_with_routed_experts_breaks_only_at_the_expert_loop():
    """grouped_mm's compiled shape rule takes bf16 alone, so routed experts in fp32 loop (the documented case)."""
    torch.manual_seed(0)
    model = GLM53(TINY)
    explained = torch._dynamo.explain(lambda x: _loss(model, x, False))(torch.randint(4, 260, (2, 33)))
    assert explained.graph_break_count > 0
    assert all("add_routed_fast" in str(b.user_stack[-1]) for b in explained.break_reasons)


@pytest.mark.parametrize("config,bf16", [(DENSE, False), (TINY, True)], ids=["dense-fp32", "routed-bf16"])
def test_steps_of_one_shape_compile_once(config, bf16):
    if not moe.HAS_GROUPED_MM and config.experts > 1:
        pytest.skip("routed experts compile whole with torch's grouped_mm (torch >= 2.9)")
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GLM53(config)
    compiled = torch.compile(model, backend=counting_backend)
    for step in range(3):
        ids = torch.randint(4, config.vocab_size, (2, 33), generator=torch.Generator().manual_seed(step))
        eager = _loss(model, ids, bf16)
        traced = _loss(compiled, ids, bf16)
        if config.experts == 1:  # the traced graph runs the same operations
            torch.testing.assert_close(traced, eager, rtol=0, atol=0)
        else:  # traced, the experts run grouped; eagerly they loop (equal to rounding, the test below)
            torch.testing.assert_close(traced, eager, rtol=1e-3, atol=1e-3)
    assert len(graphs) == 1


def test_the_normalized_sums_backward_written_for_compile_equals_the_eager_one(monkeypatch):
    from glm53.model.linear_attention import NormalizeSums

    sums = torch.randn(3, 2, 5, 9, dtype=torch.float64)
    sums[..., -1] = sums[..., -1].abs() + 0.5
    sums[0, 0, 0, -1] = 0.0  # one denominator clamped: its gradient is zero
    sums.requires_grad_(True)
    g = torch.randn(3, 2, 5, 8, dtype=torch.float64)
    eager = torch.autograd.grad(NormalizeSums.apply(sums, 1e-6), sums, g)[0]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    written = torch.autograd.grad(NormalizeSums.apply(sums, 1e-6), sums, g)[0]
    torch.testing.assert_close(written, eager, rtol=0, atol=0)
    assert written[0, 0, 0, -1] == 0


@pytest.mark.skipif(not moe.HAS_GROUPED_MM, reason="torch's grouped_mm arrived in 2.9")
@pytest.mark.parametrize("autocast", [False, True])
def test_grouped_experts_equal_the_loop_over_experts(monkeypatch, autocast):
    torch.manual_seed(0)
    layer = moe.MixtureOfExperts(dataclasses.replace(TINY, experts=6, top_k=2, shared_experts=1))
    for p in layer.parameters():
        torch.nn.init.normal_(p, 0, 0.3)
    x = torch.randn(3, 21, TINY.dim, requires_grad=True)  # 63 tokens: some experts get few rows, padded under bf16
    g = torch.randn(3, 21, TINY.dim)
    results = []
    for grouped in ("always", "never"):
        monkeypatch.setattr(moe, "GROUPED", grouped)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, balance, _ = layer(x)
        results.append((out, *torch.autograd.grad((out * g).sum() + balance, [x, *layer.parameters()])))
    # the same products; equal bit for bit at these shapes on the Xeon, but the grouped kernel may block its sums
    # differently elsewhere (a few 1e-7 apart in fp32, a bf16 rounding step under autocast)
    tolerance = dict(rtol=2e-2, atol=1e-4) if autocast else dict(rtol=1e-5, atol=1e-6)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tolerance)


def test_compiled_forwards_keep_inductors_cache_in_glm53s_cache_folder(monkeypatch, tmp_path):
    from glm53.runtime.device import compiled

    from glm53.runtime import device

    monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "set by Inductor itself")  # so that the test's end restores it
    monkeypatch.setattr(device, "USER_INDUCTOR_CACHE", None)  # the user set none before glm53 started
    assert callable(compiled(lambda x: x + 1))
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path / "later"))  # a later run's cache folder is followed
    compiled(lambda x: x + 1)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "later" / "inductor")
    monkeypatch.setattr(device, "USER_INDUCTOR_CACHE", str(tmp_path / "mine"))  # the user's own choice wins
    compiled(lambda x: x + 1)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


@pytest.mark.slow
def test_pretrain_compile_trains_as_the_eager_run(monkeypatch, tmp_path):
    """`--compile` wiring on a tiny run: traced by Dynamo without Inductor's code generation (minutes on a CPU), the
    losses equal the eager run's to float rounding."""
    from glm53.train.pretrain import pretrain

    from ..train.test_pretrain import losses, tiny_run

    torch_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: torch_compile(fn, backend="aot_eager", **kw))
    monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # restored when the test ends
    torch._dynamo.reset()
    for name, compile_ in (("eager", False), ("compiled", True)):
        pretrain(tiny_run(tmp_path / name, steps=2, checkpoints=(2,), batch_size=2,
                          compile=compile_), dev_tasks=[], log=lambda *_: None)
    torch.testing.assert_close(losses(tmp_path / "compiled"), losses(tmp_path / "eager"), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_compiled_length_bucketed_run_meets_a_few_widths_and_trains_as_the_eager_run(monkeypatch, tmp_path):
    """The broad suite cuts each batch to its longest row (a width a step); under --compile train_step rounds the
    width up to compiled_width, so the run compiles once a rounded width, not once a raw one, and the
    losses are the eager run's (the new columns are padding outside the loss, and attention is causal)."""
    from glm53 import ModelConfig
    from glm53.data.bpe_tokenizer import tokenizer_for
    from glm53.data.pretrain_batches import IGNORE_INDEX, compiled_width, pretraining_batch
    from glm53.train import pretrain as pretrain_module
    from glm53.train.pretrain import pretrain

    from ..train.test_pretrain import losses, tiny_run

    steps, rows, length = 16, 2, 384
    model = ModelConfig(**{**DENSE.__dict__, "tokenizer": "broad-bpe-2048", "vocab_size": 2048,
                           "max_sequence_length": length})
    bpe = tokenizer_for("broad-bpe-2048")
    raw = [pretraining_batch(s, rows, length, 42, "broad", tokenizer=bpe)[0].shape[1] for s in range(steps)]
    rounded = {compiled_width(w, length) for w in raw}
    assert len(rounded) < len(set(raw))  # the steps chosen show the rounding at work

    seen, graphs = [], []
    update = pretrain_module.training_update

    def recording_update(cfg, step, model_, forward, optimizer, inputs, labels, *args, **kw):
        seen.append((inputs.clone(), labels.clone()))
        return update(cfg, step, model_, forward, optimizer, inputs, labels, *args, **kw)

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: torch_compile(fn, backend=counting_backend, **kw))
    monkeypatch.setattr(pretrain_module, "training_update", recording_update)
    monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # restored when the test ends
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=torch._dynamo.config.recompile_limit):  # restored after
        for name, compile_ in (("eager", False), ("compiled", True)):
            pretrain(tiny_run(tmp_path / name, steps=steps, checkpoints=(steps,), batch_size=rows, suite="broad",
                              sequence_length=length, model=model, compile=compile_), dev_tasks=[],
                     log=lambda *_: None)
    eager, compiled = seen[:steps], seen[steps:]
    assert [i.shape[1] for i, _ in eager] == raw
    for (e_in, e_lab), (c_in, c_lab) in zip(eager, compiled):
        width = e_in.shape[1]
        assert c_in.shape[1] == compiled_width(width, length) and c_in.shape[1] % 16 == 0
        assert torch.equal(c_in[:, :width], e_in) and torch.equal(c_lab[:, :width], e_lab)
        assert torch.all(c_in[:, width:] == bpe.pad_id) and torch.all(c_lab[:, width:] == IGNORE_INDEX)
    assert 1 <= len(graphs) <= len(rounded)
    # the first step's loss equal exactly; after it the padded products round differently (up to 4e-5 relative on
    # the Zen 4 over these 16 steps, and not growing), so the tolerance is float rounding's, not the loss's scale
    torch.testing.assert_close(losses(tmp_path / "compiled"), losses(tmp_path / "eager"), rtol=2e-4, atol=0)
    assert losses(tmp_path / "compiled")[0] == losses(tmp_path / "eager")[0]


def test_compiled_widths_are_few_and_dynamo_may_compile_each():
    """Multiples of 16 up to 128 columns, of 64 above, capped at the row length; `compiled` raises Dynamo's
    recompile limit (past which a new shape would run eagerly) to the widths a run may meet."""
    from glm53.data.pretrain_batches import compiled_width, compiled_widths
    from glm53.runtime.device import compiled

    assert [compiled_width(w, 324) for w in (1, 16, 17, 73, 128, 129, 256, 257, 321, 324)] == [
        16, 16, 32, 80, 128, 192, 256, 320, 324, 324]
    assert compiled_widths(324) == 8 + 4 and compiled_widths(1024) == 8 + 14 and compiled_widths(64) == 4
    assert compiled_widths(324) == len({compiled_width(w, 324) for w in range(1, 325)})
    with torch._dynamo.config.patch(recompile_limit=8):  # restored after
        compiled(lambda x: x, shapes=compiled_widths(1024))
        assert torch._dynamo.config.recompile_limit == 22
        compiled(lambda x: x, shapes=3)  # never lowered
        assert torch._dynamo.config.recompile_limit == 22
