"""The tiny model the tests train: small enough for seconds on a CPU, with every component present."""

TINY = dict(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, top_k=2, streams=4,
            sparse_window=8, sparse_stride=8, max_sequence_length=64)
