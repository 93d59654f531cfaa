"""The recipe book's reader: a recipe by name, its chain of parents, and its settings resolved.

A recipe is one file here, NAME.toml: `change` (one sentence: what it changes over its parent, or for a first row
what it is), `parent` (absent for a first row), then settings in the flags' own names, as a --config file holds
them: a run's own settings at the top (suite, rl_start, confirm_per_family, its corpus and its evaluations), each
stage's in its table ([pretrain], [rl]). In [pretrain], `architecture = "NAME"` stands for the fields of the model
preset NAME (model/config.py MODEL_PRESETS), set where it stands: the settings after it in the same table, and later
recipes, go over them.

Resolving a recipe lays each recipe of its chain over the one before, first row first, table by table. The
resolved settings hold TOML's values as written (`resolved`); `pretraining` and `run_settings` give them as the
config dataclasses take them (lists as tuples).

Simplifications: the files are read once a process (they do not change while it runs); the book checks the shape of
a recipe (its keys' kinds, its chain, its architecture), not its settings' names and values, which the configs that
take them check (tests/recipes/ builds every recipe).
"""

from __future__ import annotations

import copy
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..model.config import MODEL_PRESETS

BOOK = Path(__file__).parent
# The speedrun's current record (docs/speedrun.md): `glm53 speedrun`'s default, as modded-nanogpt's train script is
# its record. The first row stays reachable by name (--recipe e4). A recipe that missed its target leaves the book;
# its verdict and the last commit that had it stay in docs/speedrun.md (muon-qk-bpe-b32: last in 8df6dc9).
RECORD = "muon-qk-bpe-dense"
STAGES = ("pretrain", "rl")  # a recipe's tables: one per stage of a run
ARCHITECTURE = "architecture"  # in [pretrain]: a model preset's fields


@dataclass(frozen=True)
class Recipe:
    name: str
    parent: str | None
    change: str
    settings: dict  # as written, less parent and change: a run's own settings, and a table per stage


def recipe_names(folder: Path = BOOK) -> tuple[str, ...]:
    """Every recipe of the book, by name."""
    return tuple(sorted(p.stem for p in Path(folder).glob("*.toml")))


def read_recipe(name: str, folder: Path = BOOK) -> Recipe:
    """The recipe `name` as its file states it; an unknown name, or a file of the wrong shape, is a one-line
    ValueError."""
    return _read(Path(folder), name)


@functools.lru_cache(maxsize=None)
def _read(folder: Path, name: str) -> Recipe:
    path = folder / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"unknown recipe {name!r}; the recipe book ({_where(folder)}) holds "
                         f"{', '.join(recipe_names(folder))}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"recipe {name!r} ({path}) is not valid TOML: {err}") from None
    change, parent = raw.pop("change", None), raw.pop("parent", None)
    if not isinstance(change, str) or not change.strip():
        raise ValueError(f"recipe {name!r} ({path}) needs `change`: one sentence saying what it changes over its "
                         "parent (for a first row, what it is)")
    if parent is not None and not isinstance(parent, str):
        raise ValueError(f"recipe {name!r} ({path}): parent must be a recipe's name, got {parent!r}")
    tables = [key for key, value in raw.items() if isinstance(value, dict)]
    if set(tables) - set(STAGES):
        raise ValueError(f"recipe {name!r} ({path}): unknown table {', '.join(sorted(set(tables) - set(STAGES)))}; "
                         f"a recipe's tables are {', '.join(STAGES)}")
    if ARCHITECTURE in raw.get("pretrain", {}) and raw["pretrain"][ARCHITECTURE] not in MODEL_PRESETS:
        raise ValueError(f"recipe {name!r} ({path}): architecture {raw['pretrain'][ARCHITECTURE]!r} is not a model "
                         f"preset; choose one of {', '.join(MODEL_PRESETS)} (glm53/model/config.py)")
    return Recipe(name, parent, change, raw)


def recipe_chain(name: str, folder: Path = BOOK) -> list[str]:
    """The recipe's ancestry, first row first, ending with `name`."""
    chain = [read_recipe(name, folder).name]
    while (parent := read_recipe(chain[-1], folder).parent) is not None:
        if parent in chain:
            raise ValueError(f"recipe {name!r}: its parents run in a circle ({' -> '.join([*chain, parent])}); "
                             f"each parent must be another recipe; the recipe book ({_where(folder)}) holds "
                             f"{', '.join(recipe_names(folder))}")
        if parent not in recipe_names(folder):
            raise ValueError(f"recipe {chain[-1]!r} names parent {parent!r}, which is not in the recipe book "
                             f"({_where(folder)}); it holds {', '.join(recipe_names(folder))}")
        chain.append(parent)
    return chain[::-1]


def resolved(name: str, folder: Path = BOOK) -> dict:
    """The settings of recipe `name`: its parents' and its own, laid over each other first row first (values as
    TOML reads them), each [pretrain]'s architecture opened into the model preset's fields."""
    settings: dict = {}
    for step in recipe_chain(name, folder):
        own = copy.deepcopy(read_recipe(step, folder).settings)  # the read file stays as read
        for key, value in own.items():
            if key in STAGES:
                settings[key] = {**settings.get(key, {}), **_opened(value)}
            else:
                settings[key] = value
    return settings


def _opened(table: dict) -> dict:
    """A stage's table with `architecture` replaced by the preset's fields, before the table's own settings."""
    if ARCHITECTURE not in table:
        return dict(table)
    return {**MODEL_PRESETS[table[ARCHITECTURE]], **{k: v for k, v in table.items() if k != ARCHITECTURE}}


def suite_of(name: str, folder: Path = BOOK) -> str | None:
    """The suite a recipe runs on, where it names one (None: the default suite)."""
    return resolved(name, folder).get("suite")


def pretraining(name: str, folder: Path = BOOK) -> dict:
    """Recipe `name`'s pretraining settings by their flat names (model fields included), as PretrainConfig takes
    them: what `glm53 pretrain --recipe` and `glm53 speedrun --recipe` put under the flags."""
    return as_config_values(resolved(name, folder).get("pretrain", {}))


def run_settings(name: str, folder: Path = BOOK) -> dict:
    """Run recipe `name` in RunConfig's shape: its own settings and a dict per stage, as the configs take them."""
    return as_config_values(resolved(name, folder))


def run_recipe_names(folder: Path = BOOK) -> tuple[str, ...]:
    """The recipes that make a whole run (an [rl] table along their chain): `glm53 run --preset`'s choices."""
    return tuple(name for name in recipe_names(folder) if "rl" in resolved(name, folder))


def as_config_values(settings: dict) -> dict:
    """TOML's values as the config dataclasses hold them: lists as tuples, tables walked."""
    return {k: as_config_values(v) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v
            for k, v in settings.items()}


def _where(folder: Path) -> str:
    return "glm53/recipes/" if Path(folder) == BOOK else str(folder)
