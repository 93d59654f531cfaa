"""Rewards: the numbers RL learns from, built from the verifier's verdicts, in one home.

The modes: `binary` (1 when every hidden case passes, 0 for a valid but wrong program, --invalid-penalty for an
invalid one) and `partial` (the fraction of cases passed, + --exact-bonus when all pass), numbers of a Verdict
(evaluation's receipts record the binary one). Rewards as code: an RL run's reward is the weighted sum of reward
functions, the modes among them. The RL step's use of them (each group's rewards, advantages and batch) is
train/rl_scoring.py's.

A reward function is `f(task, completion, verdict) -> float`: the Task (its task_id, family, prompt, entry_point,
cases), the text the model added, and the verifier's Verdict (status: passed, failed, timeout, memory, crashed or
invalid; passed_cases of total_cases; message; rule, the static rule an invalid program broke). `--reward` (and
RLConfig.reward) names them, comma-separated or the flag repeated, each `NAME[=WEIGHT]` (weight 1 when left out):
NAME is a built-in (`binary`, `partial`: the modes, with --invalid-penalty and --exact-bonus) or
`package.module:function`, imported when the run starts. From Python, `rl_train(cfg, reward_funcs=[...])` takes
functions, (function, weight) pairs or those names instead.

The ordering rule, checked on a probe set before the run writes anything (unless --allow-unordered-reward): for
the run's first task and a fixed completion (its family's reference body, then the empty one), the summed reward
ranks a program that passes every case above every one that does not (failed with N-1, half or no cases passed,
timeout, memory, crashed, invalid); any valid program at least as high as an invalid one (equal is allowed:
--invalid-penalty 0 pays them alike); and a failing program with more cases passed at least as high as one with
fewer. Simplifications: the probe holds the completion fixed and varies the verdict, so a term of the completion
alone (a length penalty) may reorder two different completions, as its author meant; the verdict carries no time
(the verifier records none per program), so no reward can use one.

A function that raises or returns something other than a finite number stops the run at once, naming the function,
the task and the value, before any update uses the step's rewards. Receipts record each function's name, weight
and the sha256 of its source (of its code object where the source cannot be read); the built-ins' names are
`binary` and `partial` wherever their code lies.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import marshal
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .verifier import Verdict

REWARD_MODES = ("binary", "partial")


def binary_reward(verdict: Verdict, invalid_penalty: float = -0.1) -> float:
    """1 when every hidden case passes, 0 for a valid but wrong program, `invalid_penalty` for an invalid one."""
    if verdict.status == "passed":
        return 1.0
    if verdict.status == "invalid":
        return invalid_penalty
    return 0.0


def partial_reward(verdict: Verdict, exact_bonus: float = 0.0, invalid_penalty: float = -0.1) -> float:
    """Fraction of hidden cases passed, plus `exact_bonus` when all pass, or `invalid_penalty` if invalid."""
    if verdict.status == "invalid":
        return invalid_penalty
    fraction = verdict.passed_cases / verdict.total_cases if verdict.total_cases else 0.0
    return fraction + (exact_bonus if verdict.status == "passed" else 0.0)


def reward(verdict: Verdict, mode: str = "binary", invalid_penalty: float = -0.1, exact_bonus: float = 0.0) -> float:
    if mode == "binary":
        return binary_reward(verdict, invalid_penalty)
    if mode == "partial":
        return partial_reward(verdict, exact_bonus, invalid_penalty)
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")


BUILTIN_REWARDS = REWARD_MODES  # --reward's built-in names: the modes, as the functions binary and partial
_IMPORTED = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_<][\w.<>]*")  # module:function (a qualname, <locals> included)


def parse_reward_spec(text: str) -> list[tuple[str, float]]:
    """`NAME[=WEIGHT],...` -> [(name, weight)]; a ValueError of one line naming the entry that is wrong."""
    entries = [e.strip() for e in str(text).split(",")]
    parsed = []
    for entry in entries:
        name, _, weight_text = entry.partition("=")
        name = name.strip()
        if name not in BUILTIN_REWARDS and not _IMPORTED.fullmatch(name):
            raise ValueError(f"--reward {entry!r}: name a built-in ({', '.join(BUILTIN_REWARDS)}) or a function as "
                             f"package.module:function, optionally =WEIGHT (e.g. mypkg.rewards:length_penalty=0.1)")
        try:
            weight = float(weight_text) if weight_text.strip() else 1.0
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight) or weight == 0:
            raise ValueError(f"--reward {entry!r}: the weight after = must be a finite number other than 0, "
                             f"got {weight_text!r}")
        parsed.append((name, weight))
    return parsed


RewardFunction = Callable[..., float]  # (task, completion, verdict) -> reward


def binary(task, completion: str, verdict: Verdict, *, invalid_penalty: float = -0.1) -> float:
    """The `binary` mode: 1 when every case passes, `invalid_penalty` for an invalid program, else 0."""
    return binary_reward(verdict, invalid_penalty)


def partial(task, completion: str, verdict: Verdict, *, exact_bonus: float = 0.0,
            invalid_penalty: float = -0.1) -> float:
    """The `partial` mode: the fraction of cases passed (+ `exact_bonus` when all pass), `invalid_penalty` if
    invalid."""
    return partial_reward(verdict, exact_bonus, invalid_penalty)


@dataclass(frozen=True)
class WeightedReward:
    """One term of the reward: its name (as --reward gives it), the function, its weight, and the settings a
    built-in is bound to."""

    name: str
    function: RewardFunction
    weight: float
    settings: dict = field(default_factory=dict)

    @functools.cached_property
    def source_sha256(self) -> str:
        """Its source's sha256, read once (at the run's first checkpoint): the code imported at the start is what
        runs, whatever the file says later."""
        return source_sha256(self.function)

    def record(self) -> dict:
        return {"name": self.name, "weight": self.weight, "source_sha256": self.source_sha256,
                **({"settings": self.settings} if self.settings else {})}

    def __call__(self, task, completion: str, verdict: Verdict) -> float:
        """The weighted term; a raise or a value that is not a finite number is a RewardError naming it all."""
        where = f"task {task.task_id} (verdict {verdict.status}, {verdict.passed_cases}/{verdict.total_cases} cases)"
        try:
            value = self.function(task, completion, verdict)
        except Exception as err:  # noqa: BLE001 - any failure of the user's code stops the run, named
            raise RewardError(f"rl: reward {self.name} raised {type(err).__name__}: {' '.join(str(err).split())} "
                              f"on {where}; fix the function (the run stopped before any update used it)") from err
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise RewardError(f"rl: reward {self.name} returned {value!r:.60} on {where}: a reward must be a finite "
                              f"number; fix the function (the run stopped before any update used it)")
        weighted = self.weight * float(value)
        if not math.isfinite(weighted):  # a large value times its weight overflows (the update would turn it to NaN)
            raise RewardError(f"rl: reward {self.name} returned {value!r:.60} on {where}, which times its weight "
                              f"{self.weight:g} is {weighted}: a weighted reward must be a finite number; lower the "
                              f"weight or the function's values (the run stopped before any update used it)")
        return weighted


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past float's range
        return False


class RewardError(ValueError):
    """A reward function raised or returned something other than a finite number."""


def source_sha256(function: RewardFunction) -> str:
    """sha256 of the function's source text (a functools.partial's function), or of its code object's bytes
    where the source cannot be read (defined in a REPL)."""
    while isinstance(function, functools.partial):
        function = function.func
    try:
        data = inspect.getsource(function).encode()
    except (OSError, TypeError):
        code = getattr(function, "__code__", None) or getattr(type(function).__call__, "__code__", None)
        data = marshal.dumps(code) if code is not None else repr(function).encode()
    return hashlib.sha256(data).hexdigest()


def function_name(function: RewardFunction) -> str:
    """module:qualname, as --reward would name it."""
    return f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', type(function).__name__)}"


def import_reward(name: str) -> RewardFunction:
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"--reward {name}: cannot import {module_name} ({err}); put its folder on PYTHONPATH or "
                         f"install its package") from None
    value = module
    for part in attribute.split("."):
        value = getattr(value, part, None)
    if not callable(value):
        raise ValueError(f"--reward {name}: {module_name} has no function {attribute}; name one defined at its top "
                         f"level, f(task, completion, verdict) -> float")
    return value


def reward_terms(cfg, reward_funcs: list | None = None) -> list[WeightedReward]:
    """The run's reward terms: `reward_funcs` (functions, (function, weight) pairs or --reward names) when given,
    else cfg.reward's names; built-ins bound to cfg.invalid_penalty and cfg.exact_bonus (cfg: the run's RLConfig,
    read by those three names only, so this floor needs nothing of train/)."""
    if reward_funcs is None:
        items: list = parse_reward_spec(cfg.reward)
    else:
        items = []
        for item in reward_funcs:
            if isinstance(item, str):
                items += parse_reward_spec(item)
            elif callable(item):
                items.append((item, 1.0))
            elif isinstance(item, tuple) and len(item) == 2 and callable(item[0]):
                items.append((item[0], float(item[1])))
            else:
                raise ValueError(f"reward_funcs: {item!r:.60} is not a function, a (function, weight) pair or a name "
                                 f"as --reward takes")
        if not items:
            raise ValueError("reward_funcs is empty: give at least one reward function, or leave it out for --reward")
    terms = []
    for name_or_function, weight in items:
        if not math.isfinite(weight) or weight == 0:
            raise ValueError(f"reward_funcs: the weight of {name_or_function} must be a finite number other than 0")
        if callable(name_or_function):
            terms.append(WeightedReward(function_name(name_or_function), name_or_function, weight))
        elif name_or_function == "binary":
            terms.append(WeightedReward("binary", functools.partial(binary, invalid_penalty=cfg.invalid_penalty),
                                        weight, {"invalid_penalty": cfg.invalid_penalty}))
        elif name_or_function == "partial":
            settings = {"exact_bonus": cfg.exact_bonus, "invalid_penalty": cfg.invalid_penalty}
            terms.append(WeightedReward("partial", functools.partial(partial, **settings), weight, settings))
        else:
            terms.append(WeightedReward(name_or_function, import_reward(name_or_function), weight))
    for term in terms:
        problem = signature_problem(term)
        if problem:
            raise ValueError(problem)
    return terms


def signature_problem(term: WeightedReward) -> str | None:
    """Why a term's function cannot be called as f(task, completion, verdict), said before the run starts; None
    when it can (or when its signature cannot be read: the probe then calls it)."""
    try:
        signature = inspect.signature(term.function)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None, "", None)
    except TypeError as err:
        return (f"--reward {term.name}: its function takes {signature}, so it cannot be called as f(task, completion, "
                f"verdict) ({err}); give it those three parameters")
    return None


def spec_of(terms: list[WeightedReward]) -> str:
    """The --reward text that names `terms` (what the run's settings record)."""
    return ",".join(t.name if t.weight == 1 else f"{t.name}={t.weight!r}" for t in terms)


def total_reward(terms: list[WeightedReward], task, completion: str, verdict: Verdict) -> float:
    """The weighted sum of the terms (one term of weight 1 is that function's value, bit for bit)."""
    values = [term(task, completion, verdict) for term in terms]
    total = sum(values[1:], values[0])
    if not math.isfinite(total):  # finite terms whose sum overflows
        raise RewardError(f"rl: the reward {spec_of(terms)} sums to {total} on task {task.task_id} (verdict "
                          f"{verdict.status}; its terms {', '.join(f'{v:g}' for v in values)}): a reward must be a "
                          f"finite number; lower the weights or the functions' values (the run stopped before any "
                          f"update used it)")
    return total


def probe_verdicts(total: int) -> list[tuple[str, Verdict]]:
    """The probe set's verdicts for a task of `total` cases, best first: (label, verdict)."""
    failing = sorted({total - 1, total // 2, 0}, reverse=True)
    return ([("passed", Verdict("passed", total, total))]
            + [(f"failed with {k}/{total} cases", Verdict("failed", k, total)) for k in failing]
            + [(status, Verdict(status, 0, total)) for status in ("timeout", "memory", "crashed")]
            + [("invalid", Verdict("invalid", 0, total, "probe", "probe"))])


def ordering_problem(terms: list[WeightedReward], task) -> str | None:
    """The first pair of probe verdicts whose rewards break the ordering rule, as one line; None when none does
    (or when there is no task to probe: the run then refuses its empty task list itself)."""
    if task is None:
        return None
    for completion in dict.fromkeys((task.canonical_completion or "", "")):
        probes = probe_verdicts(len(task.cases))
        scores = {label: total_reward(terms, task, completion, v) for label, v in probes}
        for better, v in probes:
            for worse, w in probes:
                strict = v.status == "passed" and w.status != "passed"
                if strict or (w.status == "invalid" and v.status != "invalid") or \
                        (v.status == w.status == "failed" and v.passed_cases > w.passed_cases):
                    if scores[better] < scores[worse] or (strict and scores[better] == scores[worse]):
                        names = [t.name for t in terms if t(task, completion, v) < t(task, completion, w)] or \
                            [t.name for t in terms]
                        relation = "above" if strict else "at least as high as"
                        return (f"rl: the reward {' + '.join(names)} breaks the ordering rule: on task {task.task_id} "
                                f"a program {better} scores {scores[better]:g} and one {worse} {scores[worse]:g}, but "
                                f"{better} must score {relation} {worse}; add a verifier term (--reward binary or "
                                f"partial) or fix the function, or pass --allow-unordered-reward to train on it")
    return None
