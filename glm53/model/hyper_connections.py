"""Hyper-connections: several residual streams, each layer reading a mix of them and writing back to all.

With S streams held stream-major, [S, B, T, D]:
    mixed   = sum_s softmax(input_logits)_s * stream_s         (what the layer reads)
    update  = layer(mixed)                                      (attention + MoE residual update)
    stream_s += softmax(output_logits)_s * update                (what the layer writes)
`input_logits` start at linspace(0.1, -0.1, S) and `output_logits` at linspace(-0.1, 0.1, S).

With one stream this is exactly a pre-norm residual block. The reference wrote `mixed + update` back (the
block's full output), counting the residual twice; `ModelConfig.hc_double_residual=True` restores that.

Two forms (`ModelConfig.residual_impl`), equal up to rounding: plain multiplies and sums over the stream axis;
fast sees the streams as one [S, B*T*D] matrix, so the read is a matrix-vector product and the write a rank-1
update (`torch.addr`), each one pass over the streams without a stream-sized temporary. That is why the streams
are stream-major: with the stream axis inside each token ([B, T, S, D]) the same products need strided copies.
Both stay in fp32 under bf16 autocast: mv and addr are not autocast ops on the CPU, but they are on CUDA, so the fast
form runs them with autocast off (`_autocast_off`), and the streams keep their dtype on every device.

Simplifications vs GLM-5.3-Flash: the released model's manifold-constrained hyper-connections (mHC) mix
streams with an input-dependent n x n matrix projected onto doubly stochastic matrices by Sinkhorn-Knopp,
plus dynamic pre/post weights (`residual="mhc"`, manifold_hyper_connections.py). Here the weights are two static
learned S-vectors and there is no stream-to-stream mixing matrix.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn


def read_streams_plain(streams: torch.Tensor, read: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """streams [S, B, T, D], read [S] -> (sum_s read_s * streams[s] [B, T, D], the streams for the write)."""
    return (streams * read[:, None, None, None]).sum(dim=0), streams


def write_streams_plain(streams: torch.Tensor, write: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    """streams [S, B, T, D], write [S], written [B, T, D] -> streams[s] + write_s * written."""
    return streams + write[:, None, None, None] * written


# The two products of an [S, M] stream-shaped matrix with vectors, forward and backward. Such a matrix may be one
# row expanded over the streams (stride 0): the first layer's streams (one embedding), and the last layer's gradient
# (the streams' mean's); mv would copy it to S rows first, so there each product reduces to that one row.
def _weighted_sum(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """weights @ rows: [S, M], [S] -> [M]."""
    if rows.stride(0) == 0:
        return rows[0] * weights.sum()
    return torch.mv(rows.t(), weights)


def _dots(rows: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """rows @ vector: [S, M], [M] -> [S]."""
    if rows.stride(0) == 0:
        return torch.dot(rows[0], vector).expand(rows.shape[0]).clone()
    return torch.mv(rows, vector)


class ReadStreamsFast(torch.autograd.Function):
    """The read as read @ streams over [S, M] (M = B*T*D), returning the streams too (a view) for the write to
    use, so that both gradients of the streams, the write's and the read's, arrive in this one backward and are
    summed in the same pass that forms the read's outer product: grad = grad_write + read (x) grad_mixed, one
    torch.addr. (Otherwise autograd forms the outer product, then adds the two: two more stream-sized passes.)"""

    @staticmethod
    def forward(ctx, streams: torch.Tensor, read: torch.Tensor):
        ctx.save_for_backward(streams, read)
        return _weighted_sum(streams, read), streams.view_as(streams)

    @staticmethod
    def backward(ctx, grad_mixed: torch.Tensor, grad_streams: torch.Tensor | None):
        streams, read = ctx.saved_tensors
        grad_read = _dots(streams, grad_mixed)
        if grad_streams is None:
            return torch.outer(read, grad_mixed), grad_read
        return torch.addr(grad_streams, read, grad_mixed), grad_read


def _autocast_off(streams: torch.Tensor):
    """Autocast off around the fast form's products: CUDA's autocast runs mv and addr in bf16, which would round the
    streams and give backward a bf16 gradient beside fp32 saved tensors (CPU autocast leaves them alone)."""
    device = streams.device.type
    return torch.autocast(device, enabled=False) if torch.is_autocast_enabled(device) else contextlib.nullcontext()


def read_streams_fast(streams: torch.Tensor, read: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with _autocast_off(streams):
        S, *rest = streams.shape
        if not (torch.is_grad_enabled() and (streams.requires_grad or read.requires_grad)):  # decoding
            return _weighted_sum(streams.reshape(S, -1), read).view(rest), streams
        mixed, passed = ReadStreamsFast.apply(streams.reshape(S, -1), read)
        return mixed.view(rest), passed.view(streams.shape)


class WriteStreamsFast(torch.autograd.Function):
    """The write as one rank-1 update, streams + write (x) written over [S, M]. Its backward is autograd's own but
    for the last layer, whose gradient (the streams' mean's) is one row expanded over the streams (see `_dots`)."""

    @staticmethod
    def forward(ctx, streams: torch.Tensor, write: torch.Tensor, written: torch.Tensor):
        ctx.save_for_backward(write, written)
        return torch.addr(streams, write, written)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        write, written = ctx.saved_tensors
        return grad, _dots(grad, written), _weighted_sum(grad, write)


def write_streams_fast(streams: torch.Tensor, write: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    with _autocast_off(streams):
        flat, flat_written = streams.reshape(write.shape[0], -1), written.reshape(-1)
        if not (torch.is_grad_enabled() and (streams.requires_grad or write.requires_grad or written.requires_grad)):
            return torch.addr(flat, write, flat_written).view(streams.shape)  # decoding
        return WriteStreamsFast.apply(flat, write, flat_written).view(streams.shape)


class HyperConnection(nn.Module):
    def __init__(self, streams: int, layer: nn.Module, double_residual: bool = False, impl: str = "fast"):
        super().__init__()
        self.streams, self.layer, self.double_residual = streams, layer, double_residual
        self.read_streams, self.write_streams = (read_streams_fast, write_streams_fast) if impl == "fast" else \
            (read_streams_plain, write_streams_plain)
        self.input_logits = nn.Parameter(torch.linspace(0.1, -0.1, streams))
        self.output_logits = nn.Parameter(torch.linspace(-0.1, 0.1, streams))

    def open_streams(self, x: torch.Tensor) -> torch.Tensor:
        """The embeddings [B, T, D] copied into S streams [S, B, T, D] (a view: no copy is made)."""
        return x.expand(self.streams, *x.shape)

    def close_streams(self, streams: torch.Tensor) -> torch.Tensor:
        """The streams' mean [B, T, D]: the model's final hidden state. As a sum, then a division: its backward is
        then one [B, T, D] division and a view, where mean's backward writes a stream-sized tensor."""
        return streams.sum(dim=0) / self.streams

    def forward(self, streams: torch.Tensor, *args, **kwargs):
        """streams [S, B, T, D] -> (new streams, the layer's auxiliary outputs)."""
        read = self.input_logits.softmax(dim=0).to(streams.dtype)
        mixed, streams = self.read_streams(streams, read)  # the fast form passes the streams on through its read
        update, *aux = self.layer(mixed, *args, **kwargs)
        written = mixed + update if self.double_residual else update
        write = self.output_logits.softmax(dim=0).to(streams.dtype)
        return self.write_streams(streams, write, written.to(streams.dtype)), *aux
