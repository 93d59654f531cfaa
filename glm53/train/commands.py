"""The `glm53 pretrain` and `glm53 rl` commands (thin: parse, then run as this process's rank). `glm53 speedrun`,
which pretrains on the clock, is speed/commands.py's."""

from __future__ import annotations

from ..data.suites import get_suite
from ..data.tasks import read_tasks
from ..recipes.book import pretraining, suite_of
from ..runtime.config import threads_problem
from ..runtime.config_file import add_config_file_flags, config_from_command
from ..runtime.memory import training_memory_problem
from ..runtime.settings import add_config_arguments
from ..verify.sandbox_policy import require_isolation
from .pretrain_config import PretrainConfig
from .rl_config import RLConfig, check_rewards_named


def add_pretrain_parser(sub) -> None:
    p = sub.add_parser("pretrain", help="pretrain on generated Python functions")
    p.add_argument("--tasks", help="task file (JSON Lines or a dataset) whose prompts are sampled at each checkpoint "
                                   "(default: dev split, one per family)")
    add_config_arguments(p, PretrainConfig, title="pretraining")
    add_config_file_flags(p)
    p.set_defaults(func=cmd_pretrain)


def cmd_pretrain(args) -> int:
    cfg = config_from_command(PretrainConfig, args, pretrain_defaults)
    if cfg is None:  # --print-config printed it (without loading torch)
        return 0
    refuse(training_memory_problem(cfg))  # before torch loads and the folder is made
    from .pretrain import pretrain

    return run_as_rank(pretrain, cfg, dev_tasks=read_tasks(args.tasks) if args.tasks else None)


def pretrain_defaults(given) -> dict:
    """What comes before --config and the flags: the suite's pretraining defaults, then --recipe's pretraining
    settings (its suite, where it names one, is the suite unless --suite is given)."""
    recipe = given("recipe")
    suite = given("suite") or (suite_of(recipe) if recipe else None)
    return {**get_suite(suite).defaults("pretrain"), **({"suite": suite} if suite else {}),
            **(pretraining(recipe) if recipe else {})}


def run_as_rank(train, cfg, **kwargs) -> int:
    """`train(cfg, ...)` as this process's rank under torchrun (joining its process group first, leaving it after),
    or as the one process; ranks other than 0 log nothing (rank 0 speaks for all)."""
    from ..runtime.distributed import from_environment, shut_down

    refuse(threads_problem(cfg.runtime.threads, cfg.runtime.force_threads))
    dp, device = from_environment(cfg.runtime.device, cfg.runtime.threads)
    try:
        train(cfg, log=print if dp.is_main else (lambda *_: None), dp=dp, device=device, **kwargs)
    except BaseException:
        shut_down(dp, finished=False)
        raise
    shut_down(dp)
    return 0


def refuse(problem: str | None) -> None:
    """A problem found before any work, as the command's one-line error."""
    if problem:
        raise ValueError(problem)


def add_rl_parser(sub) -> None:
    p = sub.add_parser("rl", help="RLOO post-training with rewards from running the model's code")
    add_config_arguments(p, RLConfig, title="RL")
    add_config_file_flags(p)
    p.set_defaults(func=cmd_rl)


def cmd_rl(args) -> int:
    cfg = config_from_command(RLConfig, args, lambda given: get_suite(given("suite")).defaults("rl"))
    if cfg is None:  # --print-config printed it (without loading torch)
        return 0
    check_rewards_named(cfg.reward, args.reward, "--reward", args.config_file)
    from .rl import rl_train

    require_isolation(cfg.runtime.accept_partial_isolation, "rl")
    return run_as_rank(rl_train, cfg)  # it reads cfg.tasks_file, where given
