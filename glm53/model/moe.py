"""Mixture of experts: 8 routed SwiGLU experts (top-2) plus an always-on shared expert.

Routing: router logits (no bias) -> top-k -> mixing weights = softmax over the k selected logits.
Output: shared(x) + sum over the selected experts of weight * expert(x). No capacity limit, no token
dropping, no router bias.

Balance loss (our choice, Switch-Transformer style): per layer, E * sum_e f_e * P_e, where f_e is the
fraction of (token, slot) assignments that went to expert e (a count, no gradient) and P_e is the mean
full-softmax router probability of expert e (differentiable). It is 1 when routing is uniform and grows as
load concentrates. Because P_e comes from the softmax over *all* E logits, every router weight gets a gradient,
also with top_k = 1, where the mixing weight is the constant 1 and the language loss alone gives the router
none. (The reference's balance term was a plain count with no gradient at all.)

The released model's router (`router="sigmoid-bias"`, the DeepSeek-V3 recipe): scores = sigmoid(router logits);
the top-k of scores + bias pick the experts, where the bias is a buffer without gradient; the mixing weights are
the chosen experts' unbiased scores renormalised to sum to 1 and multiplied by `router_scale`; no balance loss.
Forward passes with gradients count each expert's load, and after every optimizer step `update_selection_bias`
moves each bias by router_bias_rate toward even load: up for experts below the mean load, down above it.

Simplifications vs GLM-5.3-Flash: no group-limited top-k, and 8 experts on one device (the released model has
hundreds with expert parallelism). Either router's experts are computed
either with a plain loop over experts (`moe_impl="plain"`, the reference) or by grouping tokens by expert
(`moe_impl="fast"`, the default). With one routed expert under the softmax router (the speedrun record's and the
code preset's dense feed-forward) the fast form is a plain feed-forward: every token goes to that expert at weight
exactly 1, so it skips the routing's top-k, count, sort, gather and scatter. The router still runs, so the balance
loss (exactly 1) and the router's gradient (exactly 0) are those of the routed form.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


def swiglu(x: torch.Tensor, up_weight: torch.Tensor, down_weight: torch.Tensor) -> torch.Tensor:
    """down(silu(gate) * value) where up(x) = [gate | value] (gate is the first half of up_weight's rows).

    gate and value are two products with the two halves of up_weight (views) rather than one split in two: the
    element-wise passes then run on contiguous halves, and backward adds two [n, D] input gradients where the
    split's backward concatenated two [n, h] halves into [n, 2h] (the MoE layer 2-5% faster, the step 5%, on a
    2-core Zen 5 under bf16 autocast; in bf16 the input gradient is then two rounded products summed)."""
    gate_weight, value_weight = up_weight.chunk(2, dim=0)
    return F.linear(F.silu(F.linear(x, gate_weight)) * F.linear(x, value_weight), down_weight)


def expert_counts(expert_of: torch.Tensor, experts: int) -> torch.Tensor:
    """How many of `expert_of`'s entries name each expert, [experts] int64: bincount's counts, in a tensor whose
    length does not depend on the data (bincount's does, which breaks torch.compile's graph)."""
    return torch.zeros(experts, dtype=torch.long, device=expert_of.device).index_add_(
        0, expert_of, torch.ones_like(expert_of))


def grouped_swiglu(rows: torch.Tensor, up_weight: torch.Tensor, down_weight: torch.Tensor,
                   ends: torch.Tensor) -> torch.Tensor:
    """`swiglu` of each expert on its own contiguous slice of `rows` (expert e's rows end at ends[e]), as three
    grouped products over every expert at once (torch's grouped_mm: one call however many experts, and shapes that
    do not depend on the routing, so torch.compile keeps the layer in one graph). up_weight [E, 2h, D], down_weight
    [E, D, h]; the loop of `swiglu` over the slices computes the same products (equal to rounding: the grouped
    kernel may block its sums differently; tests/model/test_compile.py)."""
    offs = ends.to(torch.int32)
    gate_weight, value_weight = up_weight.chunk(2, dim=1)
    gate = F.grouped_mm(rows, gate_weight.transpose(1, 2), offs=offs)
    value = F.grouped_mm(rows, value_weight.transpose(1, 2), offs=offs)
    return F.grouped_mm(F.silu(gate) * value, down_weight.transpose(1, 2), offs=offs)


HAS_GROUPED_MM = hasattr(F, "grouped_mm")  # torch >= 2.9; before it, the experts always loop
# When the routed experts run as grouped products: "compiled" (under torch.compile, where the loop over experts would
# break the graph; eagerly the training step measured no faster than the loop, docs/speed.md), "always" or "never"
# (the agreement tests and scripts/bench_expert_forms.py switch it)
GROUPED = "compiled"


def uses_grouped(dtype: torch.dtype) -> bool:
    """Whether the routed experts run as `grouped_swiglu` on rows of `dtype`. grouped_mm takes fp32 and half precision
    eagerly on the CPU (float64, the tests', loops); compiled, its shape function takes bf16 alone (the CUDA kernel's
    rule), so a compiled fp32 step loops and breaks its graph there."""
    if GROUPED not in ("compiled", "always", "never"):
        raise ValueError(f"moe.GROUPED is {GROUPED!r}; set it to 'compiled', 'always' or 'never'")
    if not HAS_GROUPED_MM or GROUPED == "never":
        return False
    if torch.compiler.is_compiling():
        return dtype == torch.bfloat16
    return GROUPED == "always" and dtype in (torch.float32, torch.bfloat16, torch.float16)


class SwiGLUExpert(nn.Module):
    """One feed-forward expert: up dim -> 2*hidden (gate, value), down hidden -> dim, no biases."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swiglu(x, self.up.weight, self.down.weight)


class MixtureOfExperts(nn.Module):
    """Routed experts are stored stacked ([E, 2h, D] and [E, D, h]) so a grouped kernel can use them as is."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.experts = config.experts
        self.top_k = config.top_k
        self.impl = config.moe_impl
        self.row_padding = config.expert_row_padding
        self.router = nn.Linear(config.dim, config.experts, bias=False)
        self.router_kind, self.bias_rate = config.router, config.router_bias_rate
        self.router_scale = config.router_scale
        self.load_sum = None  # data parallelism: sums training forwards' expert counts over ranks (set_load_sum)
        self.routing_probe = None  # a callable given each forward's top_idx [N, k] (glm53 serve's expert view)
        if self.router_kind == "sigmoid-bias":
            # selection_bias is saved with the weights (resume continues exactly); pending_load is emptied by every
            # update, and checkpoints are written after updates, so it need not be saved
            self.register_buffer("selection_bias", torch.zeros(config.experts))
            self.register_buffer("pending_load", torch.zeros(config.experts), persistent=False)
        self.expert_up = nn.Parameter(torch.empty(config.experts, 2 * config.expert_hidden, config.dim))
        self.expert_down = nn.Parameter(torch.empty(config.experts, config.dim, config.expert_hidden))
        self.shared = nn.ModuleList(SwiGLUExpert(config.dim, config.expert_hidden)
                                    for _ in range(config.shared_experts))
        self.reset_routed_experts(config.init_std)

    def reset_routed_experts(self, std: float) -> None:
        """Normal(0, std), like every other matrix; stacked parameters are not nn.Linear, so named here."""
        nn.init.normal_(self.expert_up, 0.0, std)
        nn.init.normal_(self.expert_down, 0.0, std)

    def route(self, x: torch.Tensor):
        """x [N, D] -> (top_idx [N, k], top_weights [N, k], balance_loss scalar, usage [E])."""
        if self.router_kind == "sigmoid-bias":
            return self.route_sigmoid_bias(x)
        logits = self.router(x)
        top_logits, top_idx = logits.topk(self.top_k, dim=-1)
        top_weights = top_logits.float().softmax(dim=-1).to(torch.promote_types(x.dtype, torch.float32))
        counts = self.global_counts(top_idx)
        usage = counts / counts.sum()
        mean_prob = logits.float().softmax(dim=-1).mean(dim=0)
        balance_loss = self.experts * (usage * mean_prob).sum()
        return top_idx, top_weights, balance_loss, usage

    def runs_dense(self) -> bool:
        """The fast form with one routed expert under the softmax router: a plain feed-forward (module docstring)."""
        return self.impl == "fast" and self.experts == 1 and self.router_kind == "softmax-balance"

    def route_one(self, x: torch.Tensor):
        """`route` for one routed expert under the softmax router, without the top-k and the count: every token
        takes the expert at weight 1, so usage is [1] and the balance loss E * usage * mean softmax is 1 (its
        gradient, like the routed form's, exactly 0). Returns top_idx and top_weights as None (no routing)."""
        mean_prob = self.router(x).float().softmax(dim=-1).mean(dim=0)
        usage = torch.ones_like(mean_prob)
        return None, None, self.experts * (usage * mean_prob).sum(), usage

    def global_counts(self, top_idx: torch.Tensor) -> torch.Tensor:
        """Assignments per expert [E]; in a data-parallel training forward, over every rank's tokens, so the balance
        loss steers toward the global load (each rank's mean probability P_e then averages into the global one,
        as every rank holds as many tokens)."""
        counts = expert_counts(top_idx.flatten(), self.experts).to(torch.float32)
        if self.load_sum is not None and torch.is_grad_enabled():
            counts = self.load_sum(counts)
        return counts

    def route_sigmoid_bias(self, x: torch.Tensor):
        scores = torch.sigmoid(self.router(x).to(torch.promote_types(x.dtype, torch.float32)))
        top_idx = (scores + self.selection_bias).topk(self.top_k, dim=-1).indices
        top_scores = scores.gather(-1, top_idx)
        top_weights = top_scores / top_scores.sum(dim=-1, keepdim=True) * self.router_scale
        if torch.is_grad_enabled():  # training forwards count; sampling and evaluation do not
            self.pending_load += expert_counts(top_idx.flatten(), self.experts).to(torch.float32)
        counts = self.global_counts(top_idx)
        return top_idx, top_weights, scores.new_zeros(()), counts / counts.sum()

    @torch.no_grad()
    def update_selection_bias(self, load_sum=None) -> None:
        """One balancing step (after an optimizer step): bias += rate * sign(mean load - load), then forget the load.
        Layers whose router is frozen (outside RL's train scope) keep their bias. `load_sum`: sums the load over
        data-parallel ranks, so every rank moves its bias alike, by the global load."""
        if self.router_kind != "sigmoid-bias":
            return
        if load_sum is not None:
            self.pending_load.copy_(load_sum(self.pending_load))
        if self.router.weight.requires_grad and self.pending_load.any():  # a frozen layer (RL's train scope) stays
            self.selection_bias += self.bias_rate * torch.sign(self.pending_load.mean() - self.pending_load)
        self.pending_load.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B, T, D] -> (out [B, T, D], balance_loss, usage [E])."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        dtype = flat.dtype  # of the output: the sum of the experts stays in fp32 under bf16 autocast
        if torch.is_autocast_enabled(x.device.type):  # cast once: the router, the shared and the routed experts
            flat = flat.to(torch.get_autocast_dtype(x.device.type))  # would each cast the input on their own
        dense = self.runs_dense()
        top_idx, top_weights, balance_loss, usage = self.route_one(flat) if dense else self.route(flat)
        if self.routing_probe is not None:
            self.routing_probe(top_idx if top_idx is not None else flat.new_zeros(flat.shape[0], 1, dtype=torch.long))
        out = None
        for expert in self.shared:
            y = expert(flat)
            out = y.to(dtype) if out is None else out + y
        if out is None:
            out = torch.zeros(flat.shape, dtype=dtype, device=flat.device)
        if self.impl == "plain":
            out = out + self.routed_plain(flat, top_idx, top_weights).to(dtype)
        elif dense:  # cast once, as add_routed_fast does, and added as it adds (weight 1, every row)
            out.add_(swiglu(flat, self.expert_up[0].to(flat.dtype), self.expert_down[0].to(flat.dtype)))
        else:
            self.add_routed_fast(out, flat, top_idx, top_weights)
        return out.reshape(shape), balance_loss, usage

    def routed_plain(self, flat: torch.Tensor, top_idx: torch.Tensor, top_weights: torch.Tensor) -> torch.Tensor:
        """Plain reference: for each expert, find its tokens with torch.where and add its weighted output."""
        out = torch.zeros_like(flat)
        for e in range(self.experts):
            token, slot = torch.where(top_idx == e)
            if token.numel() == 0:
                continue
            y = swiglu(flat[token], self.expert_up[e], self.expert_down[e])
            out = out.index_add(0, token, (y * top_weights[token, slot, None]).to(out.dtype))
        return out

    def add_routed_fast(self, out: torch.Tensor, flat: torch.Tensor, top_idx: torch.Tensor,
                        top_weights: torch.Tensor) -> None:
        """Fast form, added into `out` in place: sort the (token, slot) pairs by expert once, gather their rows once,
        run each expert on one contiguous slice, scale by the routing weights and add back once (into a zeroed
        buffer in the experts' dtype, then into `out`: an index_add_ in fp32 made the layer 10% slower).
        Under bf16 autocast each expert's slice is padded to a multiple of `expert_row_padding` rows (64 by
        default), because oneDNN builds a new bf16 kernel for every new matrix shape (slow on some CPUs) and padded
        shapes repeat from step to step. The padding rows are gathered with the rest (row 0 again) and weighted 0,
        so they add exactly nothing: no per-expert padding copies and no slicing of outputs and gradients."""
        k = self.top_k
        expert_of = top_idx.flatten()
        order = torch.argsort(expert_of, stable=True)
        counts = expert_counts(expert_of, self.experts)
        grouped = uses_grouped(flat.dtype)
        # padding is for eager oneDNN's kernel cache; compiled, a grouped product's shapes never depend on the routing
        pad_to = self.row_padding if torch.is_autocast_enabled(flat.device.type) and not (
            grouped and torch.compiler.is_compiling()) else 0
        weights, slot, sizes, token_of = top_weights.flatten(), order, counts, order // k
        if pad_to:
            padded = (counts + pad_to - 1) // pad_to * pad_to
            sizes = padded
            # where each sorted pair lands: its rank plus the padding of the experts before its own
            shift = (padded.cumsum(0) - padded) - (counts.cumsum(0) - counts)
            slot = order.new_full((int(sizes.sum()),), order.numel())  # one past the pairs: the appended zero weight
            slot[torch.arange(order.numel(), device=order.device) + shift[expert_of[order]]] = order
            weights = torch.cat((weights, weights.new_zeros(1)))
            token_of = torch.where(slot < order.numel(), slot // k, 0)
        rows = flat.index_select(0, token_of)
        # cast once (autocast would cast each expert's weights on their own)
        ups, downs = self.expert_up.to(flat.dtype), self.expert_down.to(flat.dtype)
        if grouped:
            y = grouped_swiglu(rows, ups, downs, sizes.cumsum(0))
        else:  # unbind once: indexing expert_up[e] per expert would make backward build a full-size zero gradient
            ups, downs, sizes = ups.unbind(0), downs.unbind(0), sizes.tolist()  # for every expert and add them
            y = torch.cat([swiglu(segment, ups[e], downs[e]) for e, segment in enumerate(rows.split(sizes))
                           if sizes[e]])
        y = y * weights[slot, None].to(y.dtype)
        out.add_(torch.zeros(out.shape, dtype=y.dtype, device=y.device).index_add_(0, token_of, y))
