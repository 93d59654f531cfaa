"""What the held-out splits hold out, as fixed rules of the registry's data (no list to keep in sync):

- `compose`: parent/child primitive pairs. A pair is held out when a salted hash of "parent>child" falls in
  HOLDOUT_PERCENT percent; only pairs the types allow count. Adding primitives never changes whether an
  existing pair is held out. Every primitive still appears in the stream, with other parents and children.
- `phrase`: the phrasings a primitive file lists under `held_out`, and the frames and styles numbered "hN"
  (describe.py).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from .describe import held_out_frame_ids

HOLDOUT_SALT = "glm53-broad-compose-1"
HOLDOUT_PERCENT = 10


def is_held_out_pair(parent: str, child: str) -> bool:
    digest = hashlib.sha256(f"{HOLDOUT_SALT}:{parent}>{child}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 < HOLDOUT_PERCENT


def stream_pair_ok(parent: str, child: str) -> bool:
    return not is_held_out_pair(parent, child)


@lru_cache(maxsize=8)
def compatible_pairs(registry) -> tuple:
    """((parent signature, slot index, child signature), ...) for every child the types allow."""
    out = []
    for parent in registry.signatures:
        for j, (slot, t) in enumerate(zip(parent.slots, parent.arg_types)):
            if slot not in parent.prim.consts:
                out.extend((parent, j, child) for child in registry.producers[t])
    return tuple(out)


@lru_cache(maxsize=8)
def held_out_pairs(registry) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({(p.prim.name, c.prim.name) for p, _, c in compatible_pairs(registry)
                         if is_held_out_pair(p.prim.name, c.prim.name)}))


def held_out_phrasings(registry) -> frozenset[str]:
    return registry.held_out_phrasing_ids | held_out_frame_ids()
