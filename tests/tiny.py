"""The tiny model the tests train: small enough for seconds on a CPU, with every component present."""

TINY = dict(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, top_k=2, streams=4,
            sparse_window=8, sparse_stride=8, max_sequence_length=64)


def assert_cached_decoding_matches(model, ids, prefills=(10, 17), steps: int = 12) -> None:
    """Row r is prefilled with prefills[r] tokens of ids [2, T] in its own cache, the two caches are joined, then
    both rows decode one token at a time: every step's logits must equal the full forward's at that position."""
    import torch

    from glm53.model.cache import InferenceCache

    full = model(ids)
    caches = []
    for row, n in enumerate(prefills):
        cache = model.new_cache(1, ids.shape[1] + 8)
        model(ids[row:row + 1, :n], cache=cache)
        caches.append(cache)
    cache = InferenceCache.concat(caches)
    for _ in range(steps):
        p = cache.positions.tolist()
        logits = model(torch.stack([ids[0, p[0]], ids[1, p[1]]])[:, None], cache=cache)[:, -1]
        torch.testing.assert_close(logits[0], full[0, p[0]])
        torch.testing.assert_close(logits[1], full[1, p[1]])
