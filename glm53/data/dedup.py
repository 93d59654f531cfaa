"""Duplicates out of a list of documents, the first of each group kept (so the order given decides which).

Exact: two documents are the same when their text is, whitespace collapsed (`normalized_hash`: sha256 of the
words joined by one space), so a copy reindented or rewrapped is still a copy.

Near: MinHash locality-sensitive hashing (datasketch's MinHash and MinHashLSH, Broder 1997; the recipe of The Stack
and of Lee et al. 2022's deduplication) over each document's shingles, runs of --shingle-tokens code tokens (a
name, a number, or one punctuation character; so a renamed variable changes only the shingles that hold it).
LSH proposes earlier kept documents, its bands and rows chosen (`lsh_bands`) so that a pair at the threshold is
proposed with probability at least 99% (datasketch's own choice, which weighs missed pairs and false proposals
alike, proposes a pair at 0.8 with 0.8 only 40% of the time); a false proposal costs little, since each is
checked by the exact Jaccard similarity of the two shingle sets, so nothing is dropped on an estimate, and the
result is the same on every run (the permutations come from a fixed seed). A pair LSH fails to propose is missed:
near-deduplication is a sieve, not a proof.
"""

from __future__ import annotations

import hashlib
import re

TOKEN = re.compile(r"\w+|[^\w\s]")
MINHASH_SEED = 1  # datasketch's default, written down: the same permutations on every run
RECALL = 0.99  # the least probability that LSH proposes a pair exactly at the threshold


def normalized_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def exact_duplicates(texts: list[str]) -> list[bool]:
    """For each text, whether an earlier one is the same (whitespace collapsed)."""
    seen: set[str] = set()
    out = []
    for text in texts:
        digest = normalized_hash(text)
        out.append(digest in seen)
        seen.add(digest)
    return out


def shingles(text: str, size: int) -> frozenset[str]:
    """The runs of `size` consecutive code tokens (all of them as one when there are fewer)."""
    tokens = TOKEN.findall(text)
    return frozenset(" ".join(tokens[i:i + size]) for i in range(max(1, len(tokens) - size + 1)))


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def lsh_bands(threshold: float, permutations: int) -> tuple[int, int]:
    """(bands, rows per band) for MinHashLSH: the most rows (fewest false proposals) whose bands still propose a
    pair of similarity `threshold` with probability RECALL, 1 - (1 - threshold^rows)^bands (one row per band when
    none does)."""
    for rows in range(permutations, 0, -1):
        bands = permutations // rows
        if 1 - (1 - threshold ** rows) ** bands >= RECALL:
            return bands, rows
    return permutations, 1


def near_duplicates(texts: list[str], threshold: float, size: int = 5, permutations: int = 128) -> list[bool]:
    """For each text, whether an earlier text not itself a near-duplicate has shingles at least `threshold`
    similar (Jaccard) to its own."""
    from datasketch import MinHash, MinHashLSH  # numpy and scipy: loaded when a corpus is built, not by --help

    sets = [shingles(t, size) for t in texts]
    hashes = MinHash.bulk([[s.encode("utf-8") for s in sorted(sh)] for sh in sets], num_perm=permutations,
                          seed=MINHASH_SEED)
    lsh = MinHashLSH(threshold=threshold, num_perm=permutations, params=lsh_bands(threshold, permutations))
    out = []
    for i, (own, minhash) in enumerate(zip(sets, hashes)):
        near = any(jaccard(own, sets[int(j)]) >= threshold for j in lsh.query(minhash))
        out.append(near)
        if not near:
            lsh.insert(str(i), minhash)
    return out
