"""Fast forms against their plain references: forward values and gradients."""

import pytest
import torch

from glm53.model.linear_attention import (feature_map, linear_attention_fast, linear_attention_plain,
                                    linear_attention_recurrent)
from glm53.model.sparse_attention import (sparse_attention_plain, sparse_attention_index, sparse_attention_mask,
                                    sparse_attention_fast)


def _qkv(B, T, H, d, requires_grad=True):
    q, k, v = (torch.randn(B, T, H, d, dtype=torch.float64) for _ in range(3))
    q, k = feature_map(q), feature_map(k)
    return [t.detach().requires_grad_(requires_grad) for t in (q, k, v)]


@pytest.mark.parametrize("T", [1, 7, 32, 45, 64, 100])
@pytest.mark.parametrize("chunk", [8, 32, 128])  # 128: every T here is one chunk (the parallel form)
def test_linear_attention_fast_equals_plain_and_recurrent(T, chunk):
    q, k, v = _qkv(2, T, 3, 8)
    ref = linear_attention_plain(q, k, v)
    rec, _ = linear_attention_recurrent(q, k, v)
    fast = linear_attention_fast(q, k, v, chunk=chunk)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(rec, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn_like(ref)
    grads_ref = torch.autograd.grad(ref, (q, k, v), g)
    grads_fast = torch.autograd.grad(fast, (q, k, v), g)
    for a, b in zip(grads_fast, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("N", [1, 2, 5])
def test_exclusive_prefix_sum_is_cumsum_minus_itself_with_its_gradient(N):
    from glm53.model.linear_attention import ExclusivePrefixSum

    x = torch.randn(N, 3, 4, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(ExclusivePrefixSum.apply(x), x.cumsum(0) - x, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(ExclusivePrefixSum.apply, (x,))


def test_normalize_sums_divides_by_the_clamped_last_column_with_its_gradient():
    from glm53.model.linear_attention import NormalizeSums

    sums = torch.randn(2, 5, 4, dtype=torch.float64)
    sums[..., -1] = sums[..., -1].abs() + 0.5
    sums[0, :2, -1] = -0.5  # clamped: the denominator's gradient is zero there, as clamp_min's
    sums.requires_grad_()
    expected = sums[..., :-1] / sums[..., -1:].clamp_min(1e-6)
    torch.testing.assert_close(NormalizeSums.apply(sums, 1e-6), expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda s: NormalizeSums.apply(s, 1e-6), (sums,))
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(NormalizeSums.apply(sums, 1e-6), sums, g)[0],
                               torch.autograd.grad(expected, sums, g)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("T, chunk", [(45, 16), (48, 16), (9, 16)])
def test_chunk_rows_lay_out_positions_by_chunk_with_padding_and_ones(T, chunk):
    from glm53.model.linear_attention import ChunkRows

    x = torch.randn(2, T, 3, 4, dtype=torch.float64, requires_grad=True)
    chunks = -(-T // chunk)
    rows = ChunkRows.apply(x, chunks, chunk, torch.float64, True)
    padded = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, chunks * chunk - T))
    expected = torch.cat((padded, (torch.arange(chunks * chunk) < T).double()[None, :, None, None].expand(2, -1, 3, 1)),
                         dim=-1).unflatten(1, (chunks, chunk)).permute(1, 0, 3, 2, 4)
    assert rows.is_contiguous()
    torch.testing.assert_close(rows, expected, rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda t: ChunkRows.apply(t, chunks, chunk, torch.float64, True), (x,))


def test_causal_chunk_sums_are_masked_quadratic_attention_with_their_gradient():
    from glm53.model.linear_attention import CausalChunkSums

    q, k, v1 = (torch.rand(3, 6, n, dtype=torch.float64, requires_grad=True) for n in (4, 4, 5))
    expected = ((q @ k.transpose(1, 2)) * torch.ones(6, 6, dtype=torch.float64).tril()) @ v1
    torch.testing.assert_close(CausalChunkSums.apply(q, k, v1), expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(CausalChunkSums.apply, (q, k, v1))


@pytest.mark.parametrize("chunk", [16, 64])  # 64: each part is one chunk, the second with a carried state
@pytest.mark.parametrize("split", [1, 13, 32])
def test_linear_attention_fast_state_carries_across_calls(split, chunk):
    q, k, v = _qkv(1, 50, 2, 4, requires_grad=False)
    whole, (S, z) = linear_attention_fast(q, k, v, chunk=chunk, return_state=True)
    first, state = linear_attention_fast(q[:, :split], k[:, :split], v[:, :split], chunk=chunk, return_state=True)
    second, (S2, z2) = linear_attention_fast(q[:, split:], k[:, split:], v[:, split:], chunk=chunk, state=state,
                                                return_state=True)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    _, (S_rec, z_rec) = linear_attention_recurrent(q, k, v)
    torch.testing.assert_close(S2, S_rec)
    torch.testing.assert_close(z2, z_rec)
    torch.testing.assert_close(S, S_rec)


def test_sparse_pattern_matches_definition():
    T, w, s = 100, 32, 32
    mask = sparse_attention_mask(T, w, s)
    index, valid = sparse_attention_index(T, w, s)
    for p in range(T):
        expected = {j for j in range(p + 1) if p - j < w or j % s == 0}
        assert set(torch.nonzero(mask[p]).flatten().tolist()) == expected
        assert set(index[p][valid[p]].tolist()) == expected
    widths = {L: sparse_attention_index(L, 32, 32)[0].shape[1] for L in (64, 96, 128, 192)}
    assert widths == {64: 33, 96: 34, 128: 35, 192: 37}  # the reference's row widths


@pytest.mark.parametrize("T,window,stride", [(1, 8, 8), (40, 8, 8), (77, 32, 32), (128, 16, 24)])
def test_sparse_attention_fast_equals_plain(T, window, stride):
    q, k, v = (torch.randn(2, 3, T, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    ref = sparse_attention_plain(q, k, v, window, stride)
    fast = sparse_attention_fast(q, k, v, sparse_attention_mask(T, window, stride))
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    g = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad(fast, (q, k, v), g), torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("top_k", [1, 2])
@pytest.mark.parametrize("tokens", [1, 5, 64])
def test_moe_fast_equals_plain(tiny_config, top_k, tokens):
    import dataclasses

    from glm53.model.moe import MixtureOfExperts

    cfg = dataclasses.replace(tiny_config, top_k=top_k)
    fast = MixtureOfExperts(dataclasses.replace(cfg, moe_impl="fast")).double()
    plain = MixtureOfExperts(dataclasses.replace(cfg, moe_impl="plain")).double()
    for p in fast.parameters():
        torch.nn.init.normal_(p, 0, 0.3)
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(2, tokens, cfg.dim, dtype=torch.float64, requires_grad=True)
    out_g, bal_g, use_g = fast(x)
    out_l, bal_l, use_l = plain(x)
    torch.testing.assert_close(out_g, out_l)
    torch.testing.assert_close(use_g, use_l)
    torch.testing.assert_close(bal_g, bal_l)
    g = torch.randn_like(out_g)
    grads_g = torch.autograd.grad((out_g * g).sum() + bal_g, [x, *fast.parameters()])
    grads_l = torch.autograd.grad((out_l * g).sum() + bal_l, [x, *plain.parameters()])
    for a, b in zip(grads_g, grads_l):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("shared", [0, 1])
@pytest.mark.parametrize("autocast", [False, True])
def test_one_routed_experts_dense_form_equals_the_plain_and_the_routed_ones(tiny_config, shared, autocast):
    """One routed expert under the softmax router (the dense feed-forward of the record and the code preset): the
    fast form runs it as a plain feed-forward, no routing. Outputs, balance loss, usage and every gradient (the
    router's, exactly 0, included) equal the plain form's, and the routed fast form's (add_routed_fast, which the
    dense form replaces); under bf16 autocast, to bf16's rounding (the routed form pads rows, the dense one does
    not)."""
    import dataclasses

    from glm53.model.moe import MixtureOfExperts

    cfg = dataclasses.replace(tiny_config, experts=1, top_k=1, shared_experts=shared)
    dense = MixtureOfExperts(cfg)
    plain = MixtureOfExperts(dataclasses.replace(cfg, moe_impl="plain"))
    for p in dense.parameters():
        torch.nn.init.normal_(p, 0, 0.3)
    plain.load_state_dict(dense.state_dict())
    dtype = torch.float32 if autocast else torch.float64
    dense, plain = dense.to(dtype), plain.to(dtype)
    x = torch.randn(2, 9, cfg.dim, dtype=dtype, requires_grad=True)
    g = torch.randn(2, 9, cfg.dim, dtype=dtype)
    seen = []
    dense.routing_probe = seen.append
    results = []
    for moe in (dense, plain):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, balance, usage = moe(x)
        grads = torch.autograd.grad((out * g).sum() + balance, [x, *moe.parameters()])
        results.append((out, balance, usage, grads))
    tolerance = {"rtol": 1e-2, "atol": 1e-3} if autocast else {}
    for a, b in zip(results[0][:3], results[1][:3]):
        torch.testing.assert_close(a.float(), b.float(), **tolerance)
    for a, b in zip(results[0][3], results[1][3]):
        torch.testing.assert_close(a.float(), b.float(), **tolerance)
    assert results[0][1].item() == 1.0 and not dense.router.weight.grad
    assert float(results[0][3][1 + [n for n, _ in dense.named_parameters()].index("router.weight")].abs().max()) == 0
    assert torch.equal(seen[0], torch.zeros(18, 1, dtype=torch.long))
    flat = x.detach().reshape(-1, cfg.dim)
    routed = torch.zeros(flat.shape, dtype=dtype)
    dense.add_routed_fast(routed, flat, torch.zeros(18, 1, dtype=torch.long), torch.ones(18, 1, dtype=dtype))
    with torch.no_grad():
        once = dense(x.detach())[0].reshape(-1, cfg.dim) - sum(e(flat) for e in dense.shared)
    torch.testing.assert_close(once, routed)


@pytest.mark.parametrize("padding", [0, 64])
def test_moe_fast_pads_rows_under_bf16_autocast_without_changing_results(tiny_config, padding):
    import dataclasses

    from glm53.model.moe import MixtureOfExperts

    fast = MixtureOfExperts(dataclasses.replace(tiny_config, expert_row_padding=padding))
    plain = MixtureOfExperts(dataclasses.replace(tiny_config, moe_impl="plain"))
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(3, 7, tiny_config.dim)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, _, _ = fast(x)
        b, _, _ = plain(x)
    torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("tokens", [1, 21, 150])
def test_moe_padding_rows_add_nothing_to_outputs_or_gradients(tiny_config, tokens):
    """Under bf16 autocast the fast form pads each expert's rows with weight-0 copies of row 0; with padding and
    without, outputs and every gradient agree (bit for bit where the GEMM kernels round rows alike; a padding row
    that leaked would move them by the size of an expert's output)."""
    import dataclasses

    from glm53.model.moe import MixtureOfExperts

    padded = MixtureOfExperts(dataclasses.replace(tiny_config, expert_row_padding=64))
    unpadded = MixtureOfExperts(dataclasses.replace(tiny_config, expert_row_padding=0))
    unpadded.load_state_dict(padded.state_dict())
    x = torch.randn(1, tokens, tiny_config.dim, requires_grad=True)
    g = torch.randn(1, tokens, tiny_config.dim)
    results = []
    for moe in (padded, unpadded):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, balance, _ = moe(x)
        results.append((out, torch.autograd.grad((out * g).sum() + balance, [x, *moe.parameters()])))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-2, atol=1e-3)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-3)


def test_in_place_decoding_step_equals_recurrent_form():
    from glm53.model.linear_attention import linear_attention_step

    q, k, v = _qkv(3, 9, 2, 4, requires_grad=False)
    expected, (S_ref, z_ref) = linear_attention_recurrent(q, k, v)
    S, z = torch.zeros_like(S_ref), torch.zeros_like(z_ref)
    steps = [linear_attention_step(q[:, t : t + 1], k[:, t : t + 1], v[:, t : t + 1], (S, z)) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected)
    torch.testing.assert_close(S, S_ref)
    torch.testing.assert_close(z, z_ref)


def test_sparse_attention_core_in_bf16_stays_close_to_fp32(tiny_config):
    import dataclasses

    from glm53.model.rope import RotaryEmbedding
    from glm53.model.sparse_attention import SparseAttention

    fp32 = SparseAttention(tiny_config)
    bf16 = SparseAttention(dataclasses.replace(tiny_config, sparse_attention_core="bf16"))
    bf16.load_state_dict(fp32.state_dict())
    x = torch.randn(2, 20, tiny_config.dim)
    cos, sin = RotaryEmbedding(tiny_config.head_dim, 64)(20)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = fp32(x, cos, sin), bf16(x, cos, sin)
    torch.testing.assert_close(a.float(), b.float(), rtol=5e-2, atol=5e-3)


def test_linear_attention_core_in_bf16_stays_close_to_fp32_and_is_exact_without_autocast(tiny_config):
    import dataclasses

    from glm53.model.linear_attention import LinearAttention
    from glm53.model.rope import RotaryEmbedding

    fp32 = LinearAttention(tiny_config)
    bf16 = LinearAttention(dataclasses.replace(tiny_config, linear_attention_core="bf16", linear_attention_chunk=8))
    bf16.load_state_dict(fp32.state_dict())
    x = torch.randn(2, 20, tiny_config.dim, requires_grad=True)
    cos, sin = RotaryEmbedding(tiny_config.head_dim, 64)(20)
    torch.testing.assert_close(bf16(x, cos, sin), fp32(x, cos, sin), rtol=1e-5, atol=1e-6)  # fp32 without autocast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = fp32(x, cos, sin), bf16(x, cos, sin)
    torch.testing.assert_close(a.float(), b.float(), rtol=5e-2, atol=5e-3)
    assert not torch.equal(a, b)  # the products did run in bf16
    g = torch.randn_like(a.float())
    ga, gb = (torch.autograd.grad((y.float() * g).sum(), x)[0] for y in (a, b))
    torch.testing.assert_close(gb, ga, rtol=5e-2, atol=5e-3)


@pytest.mark.parametrize("per_row", [False, True])
def test_rope_fast_equals_plain_bit_for_bit(per_row):
    from glm53.model.rope import RotaryEmbedding, apply_rope, apply_rope_plain

    rope = RotaryEmbedding(16, 64)
    x = torch.randn(3, 10, 4, 16)
    cos, sin = rope.at(torch.tensor([[0], [5], [40]]) + torch.arange(10)) if per_row else rope(10)
    assert torch.equal(apply_rope(x, cos, sin), apply_rope_plain(x, cos, sin))
    xb, cb, sb = (t.to(torch.bfloat16) for t in (x, cos, sin))  # a model cast to bf16 holds bf16 tables
    assert torch.equal(apply_rope(xb, cb, sb), apply_rope_plain(xb, cb, sb))


@pytest.mark.parametrize("last_layer", [True, False])
@pytest.mark.parametrize("first_layer", [True, False])
@pytest.mark.parametrize("streams", [1, 4])
def test_hyper_connection_fast_equals_plain_in_values_and_gradients(first_layer, last_layer, streams):
    """The first layer reads streams that are one embedding expanded (a view with stride 0), later layers real ones;
    the last layer's gradient comes from the streams' sum (as close_streams: one gradient expanded over the
    streams), others' not."""
    from glm53.model.hyper_connections import (read_streams_fast, read_streams_plain, write_streams_fast,
                                               write_streams_plain)

    torch.manual_seed(0)
    x = torch.randn(2, 7, 6, dtype=torch.float64, requires_grad=True)
    read, write = (torch.randn(streams, dtype=torch.float64, requires_grad=True) for _ in range(2))
    results = []
    for read_streams, write_streams in ((read_streams_plain, write_streams_plain),
                                        (read_streams_fast, write_streams_fast)):
        s = x.expand(streams, *x.shape) if first_layer else torch.stack([x * (i + 1) for i in range(streams)])
        mixed, passed = read_streams(s, read)
        out = write_streams(passed, write, torch.tanh(mixed))
        weights = torch.linspace(-1, 1, out[0].numel() if last_layer else out.numel(), dtype=out.dtype)
        loss = (out.sum(dim=0) if last_layer else out).mul(
            weights.view(out.shape[1:] if last_layer else out.shape)).sum()
        grads = torch.autograd.grad(loss, (x, read, write))
        results.append((mixed, out, *grads))
    for plain, fast in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1, 8), (2, 5, 16), (3, 192)])
def test_rms_norm_fast_equals_plain_in_values_and_gradients(shape):
    from glm53.model.norm import rms_norm_fast, rms_norm_plain

    torch.manual_seed(0)
    x = (torch.randn(shape, dtype=torch.float64) * 3).requires_grad_()
    weight = torch.randn(shape[-1], dtype=torch.float64, requires_grad=True)
    g = torch.randn(shape, dtype=torch.float64)
    results = []
    for norm in (rms_norm_plain, rms_norm_fast):
        y = norm(x, weight, 1e-6)
        results.append((y, *torch.autograd.grad((y * g).sum(), (x, weight))))
    for plain, fast in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-6, atol=1e-6)  # the plain form computes in fp32
    assert torch.autograd.gradcheck(lambda a, b: rms_norm_fast(a, b, 1e-6), (x, weight))


def test_rms_norm_keeps_its_statistic_in_fp32_under_bf16_autocast():
    from glm53.model.norm import RMSNorm

    norm = RMSNorm(16)
    x = torch.randn(4, 16) * 100 + 1000  # a large mean: a bf16 sum of squares would be visibly off
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = norm(x)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (16,), eps=1e-6), rtol=1e-6, atol=1e-6)


def test_hyper_connection_fast_form_runs_its_products_without_autocast(monkeypatch):
    """CUDA's autocast runs mv and addr in bf16 (the CPU's does not), which rounded the streams and broke backward
    with a bf16 gradient beside fp32 saved tensors; the fast form turns autocast off around them on every device."""
    from glm53.model import hyper_connections

    seen = []
    for name in ("mv", "addr"):
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _real=real, **k: seen.append(torch.is_autocast_enabled("cpu"))
                            or _real(*a, **k))
    streams = torch.randn(4, 2, 3, 8, requires_grad=True)
    read, write = torch.softmax(torch.randn(4), 0), torch.softmax(torch.randn(4), 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed, passed = hyper_connections.read_streams_fast(streams, read)
        out = hyper_connections.write_streams_fast(passed, write, torch.tanh(mixed))
    out.sum().backward()
    assert seen and not any(seen)
    assert out.dtype == torch.float32 and streams.grad.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_hyper_connection_fast_form_trains_under_cuda_bf16_autocast():
    from glm53.model.hyper_connections import read_streams_fast, write_streams_fast

    streams = torch.randn(4, 2, 3, 8, device="cuda", requires_grad=True)
    read, write = (torch.softmax(torch.randn(4, device="cuda"), 0).requires_grad_() for _ in range(2))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        mixed, passed = read_streams_fast(streams, read)
        out = write_streams_fast(passed, write, torch.tanh(mixed))
    out.sum().backward()
    assert out.dtype == torch.float32 and streams.grad.dtype == torch.float32 and read.grad is not None
