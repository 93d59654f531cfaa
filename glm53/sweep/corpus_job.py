"""The corpus job: a sweep's [setup] that builds a corpus of real code once (`glm53 corpus build --from
python-sources`, with the spec's [setup] settings as its flags), so that every arm reads the same one as
`corpus = "{setup}/corpus/corpus.jsonl"`. Its receipt holds the build's receipt; its metrics, at the one label
"eval", the functions and bytes kept. It runs no model output, so the sandbox's isolation policy does not apply.
While a spec is checked, before the setup has run, the arms read a stand-in (spec.py `stand_in_setup`); `--plan
--time` builds the corpus in a temporary folder (seconds) and times the arms on it (timing.py)."""

from __future__ import annotations

from pathlib import Path

from ..runtime.settings import config_from_settings


def _make_corpus(settings: dict, seed: int, checkpoints: tuple[int, ...], job_dir: Path):
    from ..data.corpus_build_config import CorpusBuildConfig

    return config_from_settings(CorpusBuildConfig, {**settings, "out": str(job_dir / "corpus")}, "corpus")


def _run_corpus(cfg, job_dir: Path, log) -> dict:
    """`glm53 corpus build --from python-sources` into job_dir/corpus/: the arms read {setup}/corpus/corpus.jsonl."""
    from ..data.corpus_build import build_corpus
    from ..data.python_sources import harvest_sources

    sources, unlisted = harvest_sources(cfg.site_packages)
    receipt = build_corpus(cfg, sources, unlisted)
    kept = receipt["kept"]
    log(f"corpus: {kept['documents']} functions, {kept['bytes']} bytes, sha256 {receipt['corpus']['sha256']}")
    return {"job": "corpus", "settings": cfg.to_dict(), "seed": 0, "corpus": receipt,
            "metrics": {"eval": {"functions_kept": kept["documents"], "bytes": kept["bytes"]}}}


CORPUS = dict(name="corpus", description="a corpus of real code (glm53 corpus build --from python-sources) for a "
                                         "[setup]: the arms read {setup}/corpus/corpus.jsonl",
              metrics=("functions_kept", "bytes"), make=_make_corpus, run=_run_corpus, uses_checkpoints=False,
              verifies=False)
