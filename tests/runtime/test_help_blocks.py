"""--help groups every command's generated flags by block (runtime/settings.py BLOCKS): each setting's flag sits in
the group of the block its metadata resolves to, no group is empty, a new setting of a nested config lands in
the block of the field above it, and one that names no block stops the parser. Grouping changes no flag: the
option strings, what each parses and the parsed defaults of pretrain, rl, run, speedrun and eval are those of
HEAD at dd08160 (flags_at_dd08160.json, written from that commit's parser before issue 60's other changes).

Simplification: the comparison ignores the settings issue 60 retires or adds (RETIRED, --recipe), the wsd
choice of --lr-schedule and the run recipes --preset gains from the recipe book, and what issue 58 adds since
(ADDED_SINCE: run's HumanEval and corpus settings, the corpus's length buckets, the code-bpe-2048 tokenizer, the
`both` prompt style); their own tests hold them."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from glm53.cli import build_parser
from glm53.data.corpus_build_config import CorpusBuildConfig
from glm53.decode.sampling import Sampling
from glm53.evaluate.eval_config import EvalCommandConfig
from glm53.model.config import ModelConfig
from glm53.run_config import RunConfig
from glm53.runtime.composition import leaves
from glm53.runtime.config import RuntimeConfig
from glm53.runtime.settings import BLOCKS, add_config_arguments, flag_name, setting
from glm53.serve.serve_config import ServeConfig
from glm53.sweep.commands import SWEEP_RUNTIME_SKIP
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig
from glm53.speed.speedrun_config import SpeedrunConfig
from glm53.vision.training_config import DigitTraining

BEFORE = json.loads((Path(__file__).parent / "flags_at_dd08160.json").read_text())
RETIRED = ("width-multiple", "decay-fraction", "value-embeddings", "zero-init-projections", "expert-activation",
           "recipe")
ADDED_SINCE = ("humaneval-", "humaneval_", "corpus-from", "corpus_from", "corpus-mix", "corpus_mix",
               "eval-prompt-style", "eval_prompt_style", "corpus-in-buckets", "corpus_in_buckets", "stream-primitives",
               "stream_primitives")
NEW_CHOICES = ("wsd", "code-bpe-2048", "both")

# command -> the configs its parser is made of: (class, prefix, skip, the block the command gives settings that
# name none); a command that adds settings must be listed (test_every_command_with_settings_is_listed)
CONFIGS = {
    "info": [(ModelConfig, "", (), "model")],
    "pretrain": [(PretrainConfig, "", (), None)],
    "generate": [(Sampling, "", (), "decoding")],
    "run": [(RunConfig, "", (), None)],
    "sweep": [(RuntimeConfig, "", SWEEP_RUNTIME_SKIP, "runtime")],
    "rl": [(RLConfig, "", (), None)],
    "eval": [(EvalCommandConfig, "", (), None)],
    "vision": [(DigitTraining, "", (), "optimization"), (DigitTraining, "pilot.", (), "optimization")],
    "corpus build": [(CorpusBuildConfig, "", (), "data")],
    "speedrun": [(SpeedrunConfig, "", (), None)],
    "serve": [(ServeConfig, "", (), "runtime")],
}


def commands(parser=None, prefix=""):
    """(name, parser) of every glm53 command, subcommands' included ("corpus build")."""
    for action in (parser or build_parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}".strip(), sub
                yield from commands(sub, f"{prefix} {name}".strip())


def added_groups(parser) -> list:
    """The groups after argparse's own two (positionals, and options: -h and the command's hand-written flags)."""
    return parser._action_groups[2:]


def settings_flags(command: str) -> dict[str, str]:
    """{flag: block} of every setting the command's configs give a flag."""
    found = {}
    for cls, prefix, skip, block in CONFIGS[command]:
        for leaf in leaves(cls, prefix=prefix, skip=skip, block=block):
            if not leaf.skipped:
                found[flag_name(leaf.name)] = leaf.block
    return found


def block_of(title: str) -> str:
    """The block a group's title names: "optimization", "pretrain model" (run's --pretrain.X), else the command's
    own ("pretraining", "pretrain")."""
    return next((b for b in BLOCKS[1:] if title == b or title.endswith(" " + b)), "command")


def group_of(parser, option: str):
    return next(g for g in parser._action_groups for a in g._group_actions if option in a.option_strings)


def test_every_settings_flag_is_in_the_group_of_its_block():
    parsers = dict(commands())
    for command in CONFIGS:
        parser, settings = parsers[command], settings_flags(command)
        groups = {option: group_of(parser, option) for option in settings}
        for option, block in settings.items():
            assert block in BLOCKS, (command, option, block)
            assert groups[option] in added_groups(parser) and block_of(groups[option].title) == block, \
                (command, option, groups[option].title)
        # the rest are the command's hand-written few, outside the settings' groups
        for action in parser._actions:
            if action.option_strings[:1] and action.option_strings[0] not in settings:
                assert group_of(parser, action.option_strings[0]) not in groups.values(), (command, action)


def test_every_command_with_settings_is_listed_and_no_group_is_empty():
    for command, parser in commands():
        for group in added_groups(parser):
            assert group._group_actions, (command, group.title)
            assert command in CONFIGS or block_of(group.title) == "command", \
                f"{command} adds settings: list its configs in CONFIGS"


def test_the_big_commands_read_as_the_five_blocks():
    parsers = dict(commands())
    for command, expected in (("pretrain", {"command", "model", "optimization", "data", "runtime", "retention"}),
                              ("rl", {"command", "optimization", "data", "rollouts", "rewards", "dev evaluation",
                                      "runtime", "retention"}),
                              ("eval", {"command", "data", "decoding", "runtime"})):
        titles = [g.title for g in added_groups(parsers[command])]
        assert [block_of(t) for t in titles] == [b for b in BLOCKS if b in expected], (command, titles)
    titles = [g.title for g in added_groups(parsers["run"])]
    assert titles[:4] == ["run", "runtime", "retention", "pretrain"] and "pretrain model" in titles \
        and "rl rollouts" in titles, titles
    assert group_of(parsers["pretrain"], "--lr").title == "optimization"
    assert group_of(parsers["run"], "--rl.dev-temperature").title == "rl dev evaluation"


@dataclasses.dataclass
class Inner:
    width: int = setting(4, "a new setting that names no block")


@dataclasses.dataclass
class Outer:
    out: str = setting("", "folder", block="command")
    inner: Inner = setting(default_factory=Inner, flatten=True, block="model")


@dataclasses.dataclass
class Unplaced:
    out: str = setting("", "folder", block="command")
    steps: int = setting(1, "a setting of the command's config that names no block")


def test_a_new_setting_lands_in_the_block_above_it_and_one_in_none_stops_the_parser():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Outer, title="toy")
    assert [(g.title, [a.dest for a in g._group_actions]) for g in added_groups(parser)] == \
        [("toy", ["out"]), ("model", ["width"])]
    with pytest.raises(TypeError, match=r"^--steps is in no --help block: give its setting .* block=, one of "):
        add_config_arguments(argparse.ArgumentParser(), Unplaced)
    with pytest.raises(ValueError, match="setting block 'models' is not one of command, model,"):
        setting(1, "x", block="models")


def without_retired(flags: dict) -> dict:
    kept = {k: dict(v) for k, v in flags.items() if not any(r in k for r in RETIRED + ADDED_SINCE)}
    for v in kept.values():
        if v.get("choices"):
            v["choices"] = [c for c in v["choices"] if c not in NEW_CHOICES]
    if "--preset" in kept:  # the recipe book's run recipes, the RL arms among them (tests/recipes/)
        kept["--preset"]["choices"] = [c for c in ("full", "quick", "broad") if c in kept["--preset"]["choices"]]
    return kept


@pytest.mark.parametrize("command", sorted(BEFORE))
def test_flags_parse_and_default_as_before_grouping(command):
    parser = dict(commands())[command]
    now = {}
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            for option in action.option_strings:
                now[option] = {"dest": action.dest, "action": type(action).__name__,
                               "type": getattr(action.type, "__name__", None) if action.type else None,
                               "choices": list(action.choices) if action.choices is not None else None,
                               "required": action.required, "nargs": action.nargs}
    assert without_retired(now) == without_retired(BEFORE[command]["flags"])
    parsed = vars(build_parser().parse_args([command, *BEFORE[command]["argv"]]))
    parsed.pop("func")
    gone = [r.replace("-", "_") for r in RETIRED + ADDED_SINCE]
    keep = {k: v for k, v in BEFORE[command]["parsed"].items() if not any(r in k for r in gone)}
    assert {k: v for k, v in parsed.items() if not any(r in k for r in gone)} == keep
