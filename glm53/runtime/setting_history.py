"""Settings over time: the one table of the settings added or retired since run folders, receipts, sweep specs
and checkpoints were written, and how such a record is read today.

A record holds the settings of the code that wrote it. Two kinds of change set it apart from today's:

- added: a setting the record lacks ran at the value the code had before the setting existed, so a record
  without it is read at that value (an older run resumes, and compares, as what it did).
- retired: a setting, or one choice of a setting, that today's code no longer has. A record that holds it at the
  value today's code runs (`width_multiple = 0`, an `lr_schedule` other than wsd) did what today's code does, so
  the setting is dropped as it is read. Any other value is refused in one line naming the setting, the value and
  the last commit that had it: glm53 at that commit resumes or replays such a record.

A lever that a screen drops leaves the code with an entry here, and its verdict in the docs
(docs/speedrun.md, "Retired levers").

Simplifications: a name is matched at any depth of a record (a stage's table, its model) and in whatever config
holds it, since no two configs here give one name two meanings. A model field added since needs no entry:
ModelConfig's defaults are the reference's forms, which older checkpoints ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANY_VALUE = "any value"  # a retired setting that acted only through another setting's retired choice
ADDED, RETIRED, RETIRED_CHOICE = "added", "retired", "retired choice"
LAST_WITH_SCREENED_LEVERS = "dd08160"  # the five levers of issue 60
SCREENED = "dropped by the speedrun's screens: docs/speedrun.md, Retired levers"
ISSUE_58 = "ec77fd3"  # issue 58: HumanEval, the corpus and the prompt styles in glm53 run
ISSUE_58_BUCKETS = "e3eeae9"  # issue 58: a corpus's rows in the length buckets
ISSUE_58_STREAM = "51957d8"  # issue 58: --stream-primitives, a wider grammar for the pretraining stream
ISSUE_58_STREAM_SHARE = "5330723"  # issue 58: --stream-primitives-share, a share of the stream from that grammar


@dataclass(frozen=True)
class SettingChange:
    """One setting's change. `value` by kind: added, the value a record without it ran at; retired, the value at
    which a record's setting runs as today's code does (ANY_VALUE: every value does); retired choice, the choice
    retired (a record holding any other runs as today). `commit`: added, the commit that added it; retired, the
    last commit that had it."""

    kind: str
    value: Any
    commit: str
    why: str
    acts_with: str = ""  # added: the setting acts only beside this one set (a record without that one is today's)


SETTING_HISTORY: dict[str, SettingChange] = {
    # the reference suite, each checkpoint with its trainer state, policy gradient on the rl split, comment prompts
    "suite": SettingChange(ADDED, "reference", "04ee7aa", "the broad suite; every run before it was the reference"),
    "save_optimizer": SettingChange(ADDED, True, "a64c849", "lean checkpoints; every one kept its trainer state"),
    "objective": SettingChange(ADDED, "policy-gradient", "4ea0c12", "RL arms; RL was policy gradient"),
    "task_source": SettingChange(ADDED, "rl-split", "4ea0c12", "RL arms; RL drew the rl split"),
    "docstring_share": SettingChange(ADDED, 0.0, "5ee7945", "docstring prompts; every document had comments"),
    "stream_primitives": SettingChange(ADDED, "", ISSUE_58_STREAM, "a wider stream; runs read the built-in grammar"),
    "stream_primitives_share": SettingChange(ADDED, 1.0, ISSUE_58_STREAM_SHARE, "a share of the wider stream; every "
                                             "document came from it", acts_with="stream_primitives"),
    "prompt_style": SettingChange(ADDED, "comment", "5ee7945", "docstring prompts; every prompt had comments"),
    # pretraining before --corpus and what came after it: the generated stream alone, in order, every byte a target
    "corpus": SettingChange(ADDED, "", "12d0e9e", "--corpus; runs read the generated stream alone"),
    "corpus_validation_share": SettingChange(ADDED, 0.05, "12d0e9e", "--corpus; its default"),
    "corpus_mix": SettingChange(ADDED, None, "12d0e9e", "--corpus; its default"),
    "loss_on": SettingChange(ADDED, "all", "3b39c46", "--loss-on; every byte was a target"),
    "data_order": SettingChange(ADDED, "stream", "37ff196", "--data-order; documents came as generated"),
    "distinct_documents": SettingChange(ADDED, 0, "37ff196", "--distinct-documents; every document was new"),
    "grad_accumulation": SettingChange(ADDED, 1, "206a265", "--grad-accumulation; one micro-batch a step"),
    # the main job's corpus, prompt-style and HumanEval settings (run_config.py; a run records them only where they
    # differ from these values) and the sweep's split jobs' HumanEval metric
    "corpus_in_buckets": SettingChange(ADDED, False, ISSUE_58_BUCKETS, "--corpus rows in the broad suite's length "
                                       "buckets; each step took its share, padded", acts_with="corpus"),
    "corpus_from": SettingChange(ADDED, "none", ISSUE_58, "a corpus built by the run; runs read the stream alone"),
    "eval_prompt_style": SettingChange(ADDED, "comment", ISSUE_58, "the run's split style; every prompt had comments"),
    "humaneval_samples": SettingChange(ADDED, 0, ISSUE_58, "HumanEval in runs and sweeps; none was scored"),
    "humaneval_max_new_tokens": SettingChange(ADDED, 256, ISSUE_58, "HumanEval in runs and sweeps; its default"),
    "humaneval_temperature": SettingChange(ADDED, 0.35, ISSUE_58, "HumanEval in runs and sweeps; its default"),
    "humaneval_sampled_before": SettingChange(ADDED, False, ISSUE_58, "HumanEval in runs; its default"),
    # the levers the speedrun's screens measured and dropped
    "expert_activation": SettingChange(RETIRED, "silu", LAST_WITH_SCREENED_LEVERS,
                                       f"ReLU squared in the experts' gate, {SCREENED}"),
    "value_embeddings": SettingChange(RETIRED, 0, LAST_WITH_SCREENED_LEVERS,
                                      f"token tables added to the first layers' values, {SCREENED}"),
    "zero_init_projections": SettingChange(RETIRED, False, LAST_WITH_SCREENED_LEVERS,
                                           f"zero-initialised output projections, {SCREENED}"),
    "lr_schedule": SettingChange(RETIRED_CHOICE, "wsd", LAST_WITH_SCREENED_LEVERS,
                                 f"warmup-stable-decay, {SCREENED}"),
    "decay_fraction": SettingChange(RETIRED, ANY_VALUE, LAST_WITH_SCREENED_LEVERS,
                                    "the decaying share of lr_schedule wsd, which alone read it"),
    "width_multiple": SettingChange(RETIRED, 0, LAST_WITH_SCREENED_LEVERS,
                                    f"batch widths rounded up for a compiled step, {SCREENED}"),
}


def retired_problem(name: str, value) -> str | None:
    """Why a record's `name = value` cannot run on today's code (one line, without where it was read), or None."""
    change = SETTING_HISTORY.get(name)
    if change is None or change.kind == ADDED:
        return None
    if change.kind == RETIRED_CHOICE:
        if value != change.value:
            return None
        today = f"today's code has no {name} {value!r}"
    else:
        if change.value == ANY_VALUE or value == change.value:
            return None
        today = f"today's code runs {name} = {change.value!r} alone"
    return (f"{name} = {value!r} was retired ({change.why}); the last commit that had it is {change.commit}: run "
            f"this record with glm53 at {change.commit} ({today})")


def read_as_today(record: dict, where: str) -> dict:
    """`record` as today's code reads it: a copy without its retired settings (tables walked), each of which holds
    the value that runs as today; any other value of a retired setting or a retired choice is a ValueError in one
    line, `where` first."""
    out = {}
    for name, value in record.items():
        if isinstance(value, dict):
            out[name] = read_as_today(value, where)
            continue
        problem = retired_problem(name, value)
        if problem:
            raise ValueError(f"{where}: {problem}")
        change = SETTING_HISTORY.get(name)
        if change is None or change.kind != RETIRED:
            out[name] = value
    return out


def with_added(record: dict, now: dict) -> dict:
    """`record` with each added setting that `now` (today's settings, the same shape) has and the record lacks, at
    the value the code before it ran; tables that both hold are walked."""
    out = dict(record)
    for name, value in now.items():
        added, value_before = added_value(name, out)
        if name not in out and added:
            out[name] = value_before
        elif isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = with_added(out[name], value)
    return out


def added_value(name: str, record: dict | None = None):
    """(True, the value a record without `name` ran at) for an added setting, else (False, None). `record`: the
    record's table that would hold it; an added setting that acts only beside another that the table does not set
    is (False, None): the record is read at today's default."""
    change = SETTING_HISTORY.get(name)
    if change is None or change.kind != ADDED:
        return False, None
    if change.acts_with and record is not None and not record.get(change.acts_with):
        return False, None
    return True, change.value
