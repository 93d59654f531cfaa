import json

import pytest
import torch

from glm53.train import muon
from glm53.train.muon import StackedMuon, muon_groups, orthogonalize
from glm53.train.pretrain import pretrain

from .test_pretrain import losses, tiny_run


def _grads(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def _step_both(shapes, steps=3, **kw):
    """Run StackedMuon and torch.optim.Muon (per 2-D slice) on the same parameters and gradients."""
    ours = [torch.nn.Parameter(w.clone()) for w in _grads(shapes, 1)]
    theirs = [[torch.nn.Parameter(s.clone()) for s in (w.reshape(-1, *w.shape[-2:]))] for w in ours]
    # torch.optim.Muon runs its Newton-Schulz products in bf16 on every device; auto would take fp32 on an AVX2 CPU
    mine = StackedMuon(ours, lr=0.02, momentum=0.9, weight_decay=0.1, precision="bf16", **kw)
    torch_opt = torch.optim.Muon([p for slices in theirs for p in slices], lr=0.02, momentum=0.9, weight_decay=0.1)
    for step in range(steps):
        for p, slices, g in zip(ours, theirs, _grads(shapes, 10 + step)):
            p.grad = g.clone()
            for s, gs in zip(slices, g.reshape(-1, *g.shape[-2:])):
                s.grad = gs.clone()
        mine.step()
        torch_opt.step()
    return ours, theirs


@pytest.mark.slow
@pytest.mark.parametrize("shapes", [[(24, 16), (16, 40)], [(3, 24, 16), (2, 16, 8)]])
def test_stacked_muon_is_torch_muon_on_each_matrix(shapes):
    ours, theirs = _step_both(shapes)
    for p, slices, start in zip(ours, theirs, _grads(shapes, 1)):
        torch.testing.assert_close(p.detach().reshape(-1, *p.shape[-2:]), torch.stack([s.detach() for s in slices]),
                                   rtol=1e-5, atol=1e-6)
        assert (p.detach() - start).abs().max() > 1e-3  # it moved


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_orthogonalize_flattens_the_spectrum(dtype):
    g = torch.randn(32, 64) @ torch.diag(torch.logspace(-2, 1, 64))
    out = orthogonalize(g, dtype=dtype)
    assert out.dtype == dtype
    s = torch.linalg.svdvals(out.float())
    assert s.max() < 1.6 and s.min() > 0.3  # about U V^T: singular values near 1 (Uniform(0.5, 1.5) by design)
    assert torch.linalg.svdvals(g).max() / torch.linalg.svdvals(g).min() > 100


def test_fp32_newton_schulz_is_the_bf16_one_to_bf16_rounding():
    """The fp32 form (AVX2 CPUs) computes what the bf16 one (torch.optim.Muon's) does, only without its rounding."""
    g = torch.randn(3, 48, 96, generator=torch.Generator().manual_seed(0))
    low, high = orthogonalize(g, dtype=torch.bfloat16).float(), orthogonalize(g, dtype=torch.float32)
    assert (low - high).norm() / high.norm() < 0.05  # bf16 keeps 8 bits: about 1% an element, a few after 5 steps
    assert (low - high).abs().max() > 0  # they are two computations, not one


def test_newton_schulz_precision_rule(monkeypatch):
    cpu = torch.device("cpu")
    for native, chosen in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(muon, "native_bf16", lambda device, native=native: native)
        assert muon.newton_schulz_precision(cpu) == chosen
        assert muon.newton_schulz_precision(cpu, "bf16") == "bf16"  # named, it is kept
    with pytest.raises(ValueError, match="choose auto, bf16 or fp32"):
        muon.newton_schulz_precision(cpu, "fp16")
    with pytest.raises(ValueError, match="choose auto, bf16 or fp32"):
        StackedMuon([torch.nn.Parameter(torch.zeros(4, 4))], precision="fp16")


@pytest.mark.slow
def test_newton_schulz_precision_follows_the_hardware(monkeypatch):
    for native, chosen in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(muon, "native_bf16", lambda device, native=native: native)
        runs = []
        for precision in ("auto", chosen, "fp32" if chosen == "bf16" else "bf16"):
            params = [torch.nn.Parameter(w.clone()) for w in _grads([(24, 16), (16, 40)], 1)]
            opt = StackedMuon(params, lr=0.02, precision=precision)
            for p, g in zip(params, _grads([(24, 16), (16, 40)], 2)):
                p.grad = g
            opt.step()
            runs.append([p.detach() for p in params])
        assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1]))  # auto is the rule's choice
        assert not all(torch.equal(a, b) for a, b in zip(runs[0], runs[2]))  # and the other precision differs


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest():
    from glm53 import GLM53, ModelConfig

    from ..tiny import TINY

    model = GLM53(ModelConfig(**TINY))
    hidden, rest = muon_groups(model)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in hidden} >= {"layers.0.layer.attention.qkv.weight", "layers.0.layer.moe.expert_up"}
    assert all(".router." not in names[id(p)] and names[id(p)].startswith("layers.") for p in hidden)
    assert {"embedding.weight", "final_norm.weight", "layers.0.layer.moe.router.weight"} <= {names[id(p)] for p in rest}
    assert len(hidden) + len(rest) == len(list(model.parameters()))
    with pytest.raises(ValueError, match="give it to AdamW"):
        StackedMuon([model.final_norm.weight])


@pytest.mark.slow
def test_muon_run_trains_and_resumes_exactly(tmp_path, monkeypatch):
    whole, part = tmp_path / "whole", tmp_path / "part"
    settings = dict(optimizer="muon", muon_lr=0.02)
    pretrain(tiny_run(whole, steps=6, checkpoints=(3, 6), **settings), dev_tasks=[], log=lambda *_: None)
    receipt = json.loads((whole / "training-receipt.json").read_text())
    assert receipt["muon_newton_schulz"] == muon.newton_schulz_precision(torch.device("cpu"))
    for native, chosen in ((True, "bf16"), (False, "fp32")):  # the receipt follows the hardware's rule
        monkeypatch.setattr(muon, "native_bf16", lambda device, native=native: native)
        pretrain(tiny_run(tmp_path / chosen, steps=1, checkpoints=(1,), **settings), dev_tasks=[], log=lambda *_: None)
        assert json.loads((tmp_path / chosen / "training-receipt.json").read_text())["muon_newton_schulz"] == chosen
    monkeypatch.undo()
    pretrain(tiny_run(part, steps=3, checkpoints=(3,), **settings), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(tiny_run(part, steps=6, checkpoints=(3, 6), resume=True, **settings), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    adamw = tmp_path / "adamw"
    pretrain(tiny_run(adamw, steps=6, checkpoints=(6,)), dev_tasks=[], log=lambda *_: None)
    assert losses(adamw)[1:] != losses(whole)[1:]  # the switch changes the training
    with pytest.raises(ValueError, match="settings differ.*optimizer"):
        pretrain(tiny_run(tmp_path / "adamw", steps=6, checkpoints=(6,), resume=True, **settings), dev_tasks=[],
                 log=lambda *_: None)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("cap", [None, 24 * 16 * 2], ids=["one-call-a-shape", "capped"])
def test_batched_newton_schulz_equals_one_call_a_parameter(monkeypatch, cap, precision):
    """The step orthogonalises the matrices of one shape in one call (or in runs under the cap); the plain form calls
    once a parameter."""
    shapes = [(24, 16), (3, 24, 16), (24, 16), (16, 40), (2, 16, 40), (8, 8), (24, 16)]
    if cap is not None:
        monkeypatch.setattr(muon, "BATCH_ELEMENTS", cap)
        same = [torch.empty(s) for s in shapes if s[-2:] == (24, 16)]  # 384, 1152, 384, 384 elements
        assert [len(c) for c in muon._batches(same)] == [1, 1, 2]  # a run of two under the cap, the stack alone
    assert [len(c) for c in muon._batches([torch.empty(0), torch.empty(3)])] == [2]  # an empty parameter too
    runs = []
    for batched in (True, False):
        params = [torch.nn.Parameter(w.clone()) for w in _grads(shapes, 1)]
        opt = StackedMuon(params, lr=0.02, momentum=0.9, weight_decay=0.1, batched=batched, precision=precision)
        for step in range(3):
            for p, g in zip(params, _grads(shapes, 10 + step)):
                p.grad = g
            opt.step()
        runs.append([p.detach() for p in params])
    # equal bit for bit on the 2-core Xeon it was written on; the tolerance leaves room for a CPU whose batched product
    # rounds a bf16 element differently (a few ulps of an update of lr * ~1), far below a misplaced slice's 0.02
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
