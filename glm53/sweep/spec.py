"""A sweep spec: a small TOML file naming a base job, its arms (each a set of overrides), the seeds, the
checkpoints to evaluate, the metrics, the baseline arm and the comparisons.

    name = "my-study"
    job = "expression-pretrain"          # a kind from glm53/sweep/jobs.py
    seeds = [11, 22, 33]
    checkpoints = [50, 100, 200]         # updates at which each job is scored (pretrain-splits: [] scores each
                                         # job at its own last update, labelled "end", so arms of unequal length pair)
    metrics = ["target_byte_accuracy"]   # the first is the headline metric of the report
    baseline = "diverse-88"
    [base]                               # settings every arm shares (the job's setting names)
    steps = 200
    [arms.repeated-8]                    # one table an arm: its overrides of base
    data_order = "repeated-8"
    [arms.diverse-88]
    data_order = "diverse-88"
    [[comparisons]]                      # optional; default: every arm against the baseline
    arm = "diverse-88"
    against = "repeated-8"

A spec may name one `[setup]` job that runs once, before the arms, in DIR/setup/ (for example the pretraining run
every RL arm starts from); the arms' settings name its folder as "{setup}":

    [setup]
    job = "pretrain"
    seed = 42
    steps = 100                          # the rest are the setup job's settings
    [base]
    init = "{setup}/run/checkpoint-0100"

Either table may name a recipe of the book (glm53/recipes/) and state only what differs from it:

    [setup]
    job = "pretrain"
    recipe = "broad"                     # glm53 run --preset broad's pretraining (its suite, its checkpoints)
    [base]
    recipe = "full"                      # the main job's pretraining ...
    steps = 400                          # ... for 400 steps

The recipe gives its settings for the job's stage ([pretrain] or [rl], with its suite), less those the job takes
from elsewhere: what the suite's own defaults give alike (the job puts them under its settings), and in [base] the
checkpoints, which the spec's `checkpoints` name. So a spec that names a recipe makes the jobs, and the job
identities, it made when it stated the recipe's settings itself. Recipes are opened as the spec loads: a sweep
folder's spec.json holds the settings they gave, and the names under `recipes`.

The specs shipped in glm53/sweep/specs/ run by name (`glm53 sweep pretraining-data`). Loading checks all of
it, including that every arm's settings make a valid job, before anything is written.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile

import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from ..data.suites import suite_settings
from ..recipes.book import resolved
from ..runtime.settings import MAX_SEED
from .jobs import job_kind

SPECS_DIR = Path(__file__).parent / "specs"
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
KEYS = {"name", "description", "job", "seeds", "checkpoints", "metrics", "baseline", "base", "arms", "comparisons",
        "analysis_seed", "setup"}
RECIPE = "recipe"  # in [setup] or [base]: a recipe of the book, opened as the spec loads
RECIPE_STAGES = {"pretrain": "pretrain", "pretrain-eval": "pretrain", "pretrain-splits": "pretrain", "rl": "rl",
                 "rl-eval": "rl", "rl-splits": "rl"}  # the recipe table a job kind's settings come from
SETUP_MARK = "{setup}"
DEFAULT_ANALYSIS_SEED = 20261130


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    job: str
    seeds: tuple[int, ...]
    checkpoints: tuple[int, ...]
    metrics: tuple[str, ...]
    baseline: str
    base: dict
    arms: dict[str, dict]
    comparisons: tuple[tuple[str, str], ...]  # (arm, against): the difference is arm - against
    analysis_seed: int = DEFAULT_ANALYSIS_SEED
    setup: dict | None = None  # {"job", "seed", "checkpoints", "settings"}: run once before the arms
    recipes: dict[str, str] | None = None  # the recipe [setup] or [base] named ({"setup": "broad"}), opened already

    def settings(self, arm: str) -> dict:
        return {**self.base, **self.arms[arm]}

    def to_dict(self) -> dict:
        """JSON-ready; arms as a list, so their order survives files written with sorted keys."""
        d = asdict(self)
        d["arms"] = [{"name": name, "settings": settings} for name, settings in self.arms.items()]
        d["comparisons"] = [{"arm": a, "against": b} for a, b in self.comparisons]
        if d["recipes"] is None:  # a spec that names none saves as it did before the book
            del d["recipes"]
        return d

    @classmethod
    def from_saved(cls, d: dict) -> "SweepSpec":
        """The inverse of to_dict (a sweep folder's spec.json)."""
        d = dict(d)
        d["arms"] = {a["name"]: a["settings"] for a in d["arms"]}
        d["comparisons"] = tuple((c["arm"], c["against"]) for c in d["comparisons"])
        for key in ("seeds", "checkpoints", "metrics"):
            d[key] = tuple(d[key])
        return cls(**d)

    @property
    def labels(self) -> list[str]:
        return job_kind(self.job).labels(self.checkpoints)


def uses_setup(settings: dict) -> bool:
    return any(isinstance(v, str) and SETUP_MARK in v for v in settings.values())


def resolve_setup(settings: dict, setup_dir: str | None) -> dict:
    """The settings with "{setup}" replaced by the setup job's folder (kept as written in the spec and the job's
    identity, so a sweep folder may move)."""
    if setup_dir is None:
        return dict(settings)
    return {k: v.replace(SETUP_MARK, setup_dir) if isinstance(v, str) else v for k, v in settings.items()}


_ABSENT = object()


def with_recipe(where: str, table_name: str, table: dict, job: str) -> dict:
    """`table` ([setup] or [base]) with the recipe it names opened: the recipe's settings for the stage of `job`
    (with its suite), less those the job takes from elsewhere (see the module's docstring), under the table's own."""
    if RECIPE not in table:
        return dict(table)
    name, own = table[RECIPE], {k: v for k, v in table.items() if k != RECIPE}
    if job not in RECIPE_STAGES:
        _fail(where, f"{table_name}: a {job} job takes no recipe (recipes hold the settings of "
                     f"{', '.join(sorted(RECIPE_STAGES))} jobs)")
    try:
        recipe = resolved(str(name))
    except ValueError as err:
        _fail(where, f"{table_name}: {err}")
    stage = RECIPE_STAGES[job]
    if stage not in recipe:
        _fail(where, f"{table_name}: recipe {name!r} holds no [{stage}] settings for a {job} job")
    given = {**({"suite": recipe["suite"]} if "suite" in recipe else {}), **recipe[stage]}
    from_suite = suite_settings({"suite": own.get("suite", given.get("suite"))}, stage)
    elsewhere = {"checkpoints"} if table_name == "base" else set()  # the spec's `checkpoints` name the arms'
    lean = {k: v for k, v in given.items()
            if k == "suite" or (k not in elsewhere and not _same(from_suite.get(k, _ABSENT), v))}
    return {**lean, **own}


def _same(a, b) -> bool:
    """Equal as settings: a suite's tuple and TOML's list of the same values are."""
    return (list(a) if isinstance(a, tuple) else a) == (list(b) if isinstance(b, tuple) else b)


def _setup_from_dict(where: str, raw) -> dict:
    if not isinstance(raw, dict) or "job" not in raw:
        _fail(where, 'setup must be a table naming its job ([setup] job = "pretrain", then its settings)')
    try:
        kind = job_kind(raw["job"])
    except ValueError as err:
        _fail(where, f"setup: {err}")
    raw = with_recipe(where, "setup", raw, kind.name)
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        _fail(where, f"setup seed must be an integer, got {seed!r}")
    checkpoints = _int_list(where, "setup checkpoints", raw.get("checkpoints", []), allow_empty=True)
    settings = {k: v for k, v in raw.items() if k not in ("job", "seed", "checkpoints")}
    if uses_setup(settings):
        _fail(where, "the setup job cannot refer to its own folder ({setup})")
    try:
        kind.make(settings, seed, checkpoints, Path("."))
    except ValueError as err:
        _fail(where, f"setup: {err}")
    return {"job": kind.name, "seed": seed, "checkpoints": list(checkpoints), "settings": settings}


def shipped_specs() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS_DIR.glob("*.toml"))}


def _fail(where: str, problem: str):
    raise ValueError(f"sweep spec {where}: {problem}")


def _int_list(where: str, key: str, value, allow_empty: bool = False) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        _fail(where, f"{key} must be a list of integers, got {value!r}")
    if not value and not allow_empty:
        _fail(where, f"{key} is empty; give at least one")
    duplicates = sorted({v for v in value if value.count(v) > 1})
    if duplicates:
        _fail(where, f"{key} lists {', '.join(map(str, duplicates))} more than once")
    return tuple(value)


def parse_seeds(text: str) -> list[int]:
    """`--seeds 1,2,3` (or 11:110:11 for a range with a step)."""
    try:
        if ":" in text:
            start, stop, *step = (int(x) for x in text.split(":"))
            return list(range(start, stop + 1, step[0] if step else 1))
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers such as 1,2,3 (or start:stop:step), "
                         f"got {text!r}") from None


def load_spec(spec: str | Path, seeds: list[int] | None = None) -> SweepSpec:
    """A spec from a file path or a shipped name; `seeds` replaces the spec's seeds."""
    path = Path(spec)
    if not path.is_file():
        shipped = shipped_specs()
        if str(spec) not in shipped:
            raise ValueError(f"sweep spec {spec!r} is neither a file nor a shipped spec; shipped specs are "
                             f"{', '.join(shipped) or 'none'}")
        path = shipped[str(spec)]
    where = str(spec)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        _fail(where, f"is not valid TOML: {err}")
    return spec_from_dict(raw, where, seeds)


def spec_from_dict(raw: dict, where: str, seeds: list[int] | None = None) -> SweepSpec:
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        _fail(where, f"unknown key {', '.join(map(repr, unknown))}; known keys are {', '.join(sorted(KEYS))}")
    for key in ("job", "arms", "seeds", "baseline") if seeds is None else ("job", "arms", "baseline"):
        if key not in raw:
            _fail(where, f"needs {key!r}")
    try:
        kind = job_kind(raw["job"])
    except ValueError as err:
        _fail(where, str(err))
    seed_list = _int_list(where, "seeds", raw.get("seeds") if seeds is None else list(seeds))
    wild = [s for s in seed_list if not 0 <= s <= MAX_SEED]
    if wild:  # every job would fail as it starts: torch takes no such seed
        _fail(where, f"seeds must lie in [0, {MAX_SEED}] (torch and the data streams derive their seeds from them), "
                     f"got {', '.join(map(str, wild))}")
    checkpoints = _int_list(where, "checkpoints", raw.get("checkpoints", []),
                            allow_empty=not kind.uses_checkpoints or kind.scores_end)
    if kind.uses_checkpoints and any(c < 1 for c in checkpoints):
        _fail(where, f"checkpoints must be positive update counts, got {list(checkpoints)}")
    metrics = raw.get("metrics", list(kind.metrics[:1]))
    if not isinstance(metrics, list) or not metrics:
        _fail(where, "metrics must be a non-empty list of metric names")
    bad = [m for m in metrics if m not in kind.metrics]
    if bad:
        _fail(where, f"unknown metric {', '.join(map(repr, bad))} for job {kind.name!r}; its metrics are "
                     f"{', '.join(kind.metrics)}")
    base, arms = raw.get("base", {}), raw["arms"]
    if not isinstance(base, dict):
        _fail(where, "base must be a table of settings")
    recipes = {table: raw[table][RECIPE] for table in ("setup", "base")
               if isinstance(raw.get(table), dict) and RECIPE in raw[table]}
    base = with_recipe(where, "base", base, kind.name)
    if not isinstance(arms, dict) or not arms:
        _fail(where, "arms is empty; add at least one [arms.NAME] table")
    setup = _setup_from_dict(where, raw["setup"]) if "setup" in raw else None
    for name, overrides in arms.items():
        if not ARM_NAME.fullmatch(name):  # a folder's name (DIR/runs/ARM) and a report table's cell
            _fail(where, f"arm name {name!r} must be letters, digits, '.', '_' and '-' (starting with a letter or "
                         "a digit); rename the [arms.NAME] table")
        if not isinstance(overrides, dict):
            _fail(where, f"arm {name!r} must be a table of settings ([arms.{name}])")
        if "seed" in overrides or "seed" in base:
            _fail(where, "seed is set by the sweep (seeds = [...] or --seeds), not by base or an arm")
        if RECIPE in overrides:
            _fail(where, f"arm {name!r} names a recipe; an arm states what it changes over [base], which may name "
                         "the recipe")
        if setup is None and uses_setup({**base, **overrides}):
            _fail(where, f"arm {name!r} refers to {SETUP_MARK} but the spec has no [setup] job")
    baseline = raw["baseline"]
    if baseline not in arms:
        _fail(where, f"baseline {baseline!r} is not an arm; arms are {', '.join(arms)}")
    comparisons = raw.get("comparisons")
    if comparisons is None:
        pairs = tuple((a, baseline) for a in arms if a != baseline)
    else:
        if not isinstance(comparisons, list):
            _fail(where, "comparisons must be a list of {arm = ..., against = ...} tables ([[comparisons]])")
        pairs = []
        for c in comparisons:
            if not isinstance(c, dict) or set(c) != {"arm", "against"}:
                _fail(where, f"each comparison needs exactly 'arm' and 'against', got {c!r}")
            for side in ("arm", "against"):
                if c[side] not in arms:
                    _fail(where, f"comparison names unknown arm {c[side]!r}; arms are {', '.join(arms)}")
            if c["arm"] == c["against"]:
                _fail(where, f"comparison of {c['arm']!r} against itself")
            pairs.append((c["arm"], c["against"]))
        pairs = tuple(pairs)
    analysis_seed = raw.get("analysis_seed", DEFAULT_ANALYSIS_SEED)
    if not isinstance(analysis_seed, int) or isinstance(analysis_seed, bool):
        _fail(where, f"analysis_seed must be an integer, got {analysis_seed!r}")
    spec = SweepSpec(name=str(raw.get("name", Path(where).stem)), description=str(raw.get("description", "")),
                     job=kind.name, seeds=seed_list, checkpoints=checkpoints, metrics=tuple(metrics),
                     baseline=baseline, base=dict(base), arms={k: dict(v) for k, v in arms.items()},
                     comparisons=pairs, analysis_seed=analysis_seed, setup=setup, recipes=recipes or None)
    with stand_in_setup(setup) as setup_dir:
        for arm in spec.arms:  # every arm must make a valid job before anything is written
            try:
                kind.make(resolve_setup(spec.settings(arm), setup_dir), seed_list[0], checkpoints, Path("."))
            except ValueError as err:
                _fail(where, f"arm {arm!r}: {err}")
    return spec


@contextlib.contextmanager
def stand_in_setup(setup: dict | None):
    """Where the arms' "{setup}" points while a spec is checked, before its setup job has run: for a corpus setup, a
    folder holding a stand-in corpus/corpus.jsonl (the arms' --corpus must exist when their config is made; its
    content is read when a job runs); for any other, None (the settings are checked as written)."""
    if setup is None or setup["job"] != "corpus":
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="glm53-setup-") as folder:
        (Path(folder) / "corpus").mkdir()
        (Path(folder) / "corpus" / "corpus.jsonl").write_text(json.dumps({"text": "def f():\n    return 1\n"}) + "\n")
        yield folder
