"""`glm53 pretrain`'s settings: every flag with its default and help, checked as a whole when the config is made
(pretrain.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..decode.sampling import MAX_NEW_TOKENS
from ..data.run_order import DATA_ORDERS, run_documents
from ..data.suites import DEFAULT_SUITE, SUITE_NAMES, get_suite
from ..data.training_stream import stream_primitives_problem
from ..model.config import ModelConfig
from ..recipes.book import recipe_names
from ..runtime.config import KERNEL_CHOICES, RuntimeConfig
from ..runtime.composition import composed, record
from ..runtime.settings import MAX_SEED, Checks, default_checkpoints, setting
from ..checkpoints.retention import Retention
from .optimization import Optimization

DEFAULT_CHECKPOINTS = (100, 200, 400)
# Besides the runtime (runtime/config.py: RESUMABLE_CHANGES), a resumed pretraining run may go further: the batch
# of step t is a pure function of (seed, t), so a longer run continues the shorter one (a cosine schedule excepted).
EXTENSIONS = frozenset({"steps", "checkpoints"})
# Recorded, never compared when a run resumes: the settings a recipe gave are (an older run, which names none, resumes)
LABELS = frozenset({"recipe"})
LOSS_ON = ("all", "completion")  # data/pretrain_batches.py `completion_labels`


@composed
@dataclass
class PretrainConfig:
    out: str = setting("", "run folder (must not exist, unless --resume)", required=True, block="command")
    steps: int = setting(400, "optimizer steps", at_least=1, block="optimization")
    checkpoints: tuple[int, ...] | None = setting(None, "steps to save a checkpoint at (the last step always is)",
                                                  shown="100,200,400, those within --steps", block="retention")
    batch_size: int = setting(32, "rows per step (per micro-batch with --grad-accumulation)", at_least=1,
                              block="optimization")
    grad_accumulation: int = setting(1, "micro-batches of --batch-size rows whose gradients add up to one optimizer "
                                        "step: a step of K x --batch-size rows (equal to rounding), in the memory of "
                                        "one micro-batch", at_least=1, block="optimization")
    sequence_length: int = setting(128, "tokens per row", at_least=2, block="data")
    optimization: Optimization = setting(default_factory=Optimization, flatten=True, block="optimization")
    balance_coef: float = setting(0.01, "weight of the router balance loss", at_least=0, block="optimization")
    indexer_coef: float = setting(1.0, "weight of the indexer's KL term (sparse_selection=indexer); it trains only "
                                       "the indexers, whose input is detached", at_least=0, block="optimization")
    mtp_coef: float = setting(0.3, "weight of the multi-token-prediction loss (mtp_depth = 1)", at_least=0,
                              block="optimization")
    indexer_warmup_steps: int = setting(0, "first steps in which indexer layers attend densely while their indexer "
                                           "learns toward that attention (sparse_selection=indexer)", at_least=0,
                                        block="optimization")
    seed: int = setting(42, "seed of the initialization and the data stream", at_least=0, at_most=MAX_SEED,
                        block="command")
    # the sandbox judges only the dev completions here, so the isolation policy is the commands' that score with it
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=("accept_partial_isolation", "trust_unverified"), block="runtime")
    kernels: str = setting("auto", "auto: the kernel settings `glm53 calibrate` measured fastest here, when cached "
                                   "(recorded in the receipt's config); config: the model flags as given",
                           choices=KERNEL_CHOICES, block="runtime")
    compile: bool = setting(False, "torch.compile the model (a one-time compile of about a minute)", block="runtime")
    dev_max_new_tokens: int = setting(MAX_NEW_TOKENS, "token cap of the dev completions sampled at each checkpoint",
                                      at_least=1, block="data")
    suite: str = setting(DEFAULT_SUITE, "task suite, reference or broad: its pretraining stream and dev tasks (broad: "
                                        "also a context of 384, rows of 324 and a token cap of 192, unless given)",
                         choices=SUITE_NAMES, block="command")
    # a label here: the command puts the recipe's settings under --config and the flags (train/commands.py)
    recipe: str = setting("", "a recipe of the book (glm53/recipes/) whose pretraining settings and suite come before "
                              f"--config and the flags: {', '.join(recipe_names())} (empty: none)", block="command")
    corpus: str = setting("", "pretrain on your own data: a folder of .py/.txt files (recursive), a JSON Lines file "
                              "with a \"text\" field per row, a dataset with a \"text\" column (a folder "
                              "save_to_disk wrote, DIR:SPLIT of a DatasetDict, or a .parquet file; the hf extra), "
                              "or one .py/.txt file, a single document stream whose "
                              "tail is held out (empty: the suite's generated stream only); the checkpoints then "
                              "complete held-out corpus text instead of the suite's dev prompts", block="data")
    corpus_validation_share: float = setting(0.05, "--corpus: share of its documents held out for the validation "
                                                   "loss (chosen by a hash of each file's path or row's text; a "
                                                   "single file: the share of its bytes at its end)",
                                             above=0, below=1, block="data")
    corpus_mix: float | None = setting(None, "--corpus: share of each step's rows from the corpus, the rest from "
                                             "the generated stream", shown="1.0 with --corpus",
                                       at_least=0, at_most=1, block="data")
    corpus_in_buckets: bool = setting(True, "--corpus on a suite that batches by length (broad): sort each window "
                                            "of 8 steps' corpus rows by length with its generated documents, so long "
                                            "rows share batches (--no-corpus-in-buckets: each step takes its share of "
                                            "corpus rows, every row padded to --sequence-length)", block="data")
    loss_on: str = setting("all", "targets of the language loss: all (every byte of each document, the reference) "
                                  "or completion (a task document's body alone: the prompt is read, not predicted; "
                                  "corpus rows stay whole)", choices=LOSS_ON, block="data")
    data_order: str = setting("stream", "order of the generated documents: stream (as generated, the reference), "
                                        "blocked (the run's documents grouped by root function or family) or "
                                        "curriculum (by depth, depth 1 first; broad suite)", choices=DATA_ORDERS,
                              block="data")
    docstring_share: float = setting(0.0, "broad suite: share of the generated documents whose description is a "
                                          "PEP 257 docstring under the def line (with one of its cases as an "
                                          "example) instead of comment lines above it, chosen per document by a hash "
                                          "of (seed, index)", at_least=0, at_most=1, block="data")
    stream_primitives: str = setting("", "broad suite: a primitive file merged into the pretraining stream's "
                                         "registry only (new primitives and phrasings; every evaluation split stays "
                                         "built-in), guarded against HumanEval and the human split: wider (the file "
                                         "shipped, glm53/data/broad/stream/wider.toml) or a path; empty: the built-in "
                                         "grammar", block="data")
    stream_primitives_share: float = setting(1.0, "broad suite, with --stream-primitives: the share of the "
                                                  "generated documents drawn from the wider registry, chosen per "
                                                  "document by a hash of (seed, index); the rest are the built-in "
                                                  "stream's documents at the same index (1: every document)",
                                             at_least=0, at_most=1, block="data")
    distinct_documents: int = setting(0, "distinct generated documents the run cycles over, at the same token "
                                         "budget (0: every document new)", at_least=0, block="data")
    eval_every: int = setting(0, "validation loss every N steps (0: only at checkpoints)", at_least=0, block="data")
    validation_rows: int = setting(64, "rows the validation loss averages over: the corpus's held-out rows, or "
                                       "generated documents training never reads (0: no validation loss)",
                                   at_least=0, block="data")
    # --keep-last, --save-optimizer
    retention: Retention = setting(default_factory=Retention, flatten=True, block="retention")
    model: ModelConfig = setting(default_factory=ModelConfig, flatten=True, record="nested", block="model")

    def __post_init__(self) -> None:
        self.checkpoints = default_checkpoints(self.checkpoints, DEFAULT_CHECKPOINTS, self.steps)
        check = Checks("pretrain")
        check.require(all(1 <= c <= self.steps for c in self.checkpoints),
                      f"--checkpoints {','.join(map(str, self.checkpoints))} must lie in [1, --steps {self.steps}]")
        check.require(self.sequence_length <= self.model.max_sequence_length,
                      f"--sequence-length {self.sequence_length} must be <= --max-sequence-length "
                      f"{self.model.max_sequence_length}")
        check.require(self.model.mtp_depth == 0 or self.sequence_length >= 3,
                      f"--sequence-length {self.sequence_length} is too short for --mtp-depth 1, which predicts two "
                      "tokens ahead: use 3 or more")
        check.require(self.indexer_warmup_steps <= self.steps,
                      f"--indexer-warmup-steps {self.indexer_warmup_steps} must be <= --steps {self.steps}")
        check.require(self.indexer_warmup_steps == 0 or self.model.sparse_selection == "indexer",
                      "--indexer-warmup-steps needs --sparse-selection indexer (there is no indexer to warm up)")
        warmup = self.optimization.warmup_steps
        check.require(warmup <= self.steps, f"--warmup-steps {warmup} must be <= --steps {self.steps}")
        check.require(not self.recipe or self.recipe in recipe_names(),
                      f"--recipe {self.recipe!r} is not in the recipe book; choose one of {', '.join(recipe_names())}")
        self.check_data(check)
        self.retention.check(check, self.runtime.resume)
        check.declared(self)
        if self.suite in SUITE_NAMES:
            # the context only: `glm53 run` builds this config before it sets the run's suite, so the tokenizer is
            # checked where the suite is final (pretrain(), RunConfig)
            problem = get_suite(self.suite).context_problem(self.model.max_sequence_length, self.sequence_length)
            check.require(problem is None, str(problem))
        check.done()
        if self.steps not in self.checkpoints:
            self.checkpoints = self.checkpoints + (self.steps,)  # the final weights are always kept

    def check_data(self, check: Checks) -> None:
        """The corpus and validation settings (the corpus's content is read, and checked, when the run starts)."""
        if self.corpus:
            # DIR:SPLIT (a split of a folder of splits: glm53/interop/datasets_io.py) is no path: its DIR exists
            named = Path(self.corpus).exists() or Path(self.corpus.rpartition(":")[0] or self.corpus).is_dir()
            check.require(named, f"--corpus {self.corpus} does not exist; give a folder of .py/.txt files, a JSON "
                                 "Lines file, a dataset (a folder save_to_disk wrote, DIR:SPLIT of a folder of splits, "
                                 "or a .parquet file) or one .py/.txt file")
            self.corpus_mix = 1.0 if self.corpus_mix is None else self.corpus_mix
            # a corpus's files have no prompt: with --loss-on completion its rows stay whole targets and the
            # generated rows' bodies are the rest, so a run of the corpus alone would have nothing to leave out
            check.require(self.loss_on == "all" or self.corpus_mix < 1, "--loss-on completion needs task-shaped "
                          "documents, and a corpus's files have no prompt to leave out; with --corpus-mix 1 use "
                          "--loss-on all (below 1, the generated rows' prompts are left out, corpus rows kept whole)")
        else:
            check.require(self.corpus_mix is None, "--corpus-mix needs --corpus (the share of rows from it)")
        reordered = self.data_order != "stream" or self.distinct_documents > 0
        check.require(not (reordered and self.corpus), "--data-order and --distinct-documents order the generated "
                                                       "stream; with --corpus leave them at stream and 0")
        if self.distinct_documents and self.suite in SUITE_NAMES:
            documents = run_documents(self.steps, self.batch_size * self.grad_accumulation,
                                      get_suite(self.suite).bucket_steps)
            check.require(self.distinct_documents < documents,
                          f"--distinct-documents {self.distinct_documents} must be fewer than the {documents} "
                          "documents the run reads (--steps x --batch-size x --grad-accumulation), or no document is "
                          "seen twice; use 0 for a stream of new documents")
        check.require(self.docstring_share == 0 or self.suite == "broad",
                      f"--docstring-share renders the broad suite's documents with docstrings; the {self.suite} "
                      "suite's are its own: use --suite broad or --docstring-share 0")
        problem = stream_primitives_problem(self.suite, self.stream_primitives)
        check.require(self.stream_primitives_share == 1 or self.stream_primitives,
                      f"--stream-primitives-share {self.stream_primitives_share} shares the stream with a primitive "
                      "file, and none is given: add --stream-primitives wider|FILE, or leave the share at 1")
        check.require(self.stream_primitives_share > 0 or not self.stream_primitives,
                      "--stream-primitives-share 0 draws no document from the file: leave --stream-primitives empty "
                      "for the built-in grammar, or give a share above 0")
        check.require(problem is None, str(problem))
        check.require(self.data_order != "curriculum" or self.suite == "broad",
                      f"--data-order curriculum sorts by a task's depth, which the {self.suite} suite's tasks do not "
                      "have; use --suite broad or another order")

    def check_resumed_steps(self, held_steps: int) -> None:
        """A resumed run may go longer (EXTENSIONS), except where its total shapes what each step does."""
        if held_steps == self.steps:
            return
        if self.optimization.lr_schedule == "cosine":
            raise ValueError("--resume: steps differ, and a cosine schedule depends on the total")
        if self.data_order != "stream":
            raise ValueError(f"--resume: steps differ, and a {self.data_order} data order spans the run's total; "
                             f"resume with --steps {held_steps}, or start a longer run in a new --out")

    def to_dict(self) -> dict:
        settings = record(self)
        buckets = self.suite in SUITE_NAMES and get_suite(self.suite).bucket_steps
        if not (self.corpus and buckets):  # it acts only there: elsewhere a record is as it was before the setting
            settings.pop("corpus_in_buckets")
        if not self.stream_primitives:  # a record without it read the built-in grammar, as every run before it
            settings.pop("stream_primitives")
        if self.stream_primitives_share == 1:  # every document from the file, as every run with one before it
            settings.pop("stream_primitives_share")
        return settings
