"""The verifier, which is the reward. Read in this order:

    languages.py       the language levels (reference, python, python-stdlib) as data: nodes, builtins, attribute
                       allow-list, importable modules
    static_check.py    stage 1: fail-closed rules on the parsed source (nothing runs)
    isolation.py       the OS layers for candidate processes: namespaces, user drop, seccomp
    values.py          tagged JSON values and type-strict equality, between the sandbox's processes
    channels.py        pipes with deadlines and caps
    candidate_builtins.py  the builtins a program is defined with (python-stdlib: calculator eval, modules)
    sandbox_worker.py  stage 2: a clean template process forks one isolated child per program; cases one by one
    verifier.py        verify / verify_many / SandboxPool / Verdict, and what is guaranteed
    rewards.py         the rewards, in one home: the modes on a Verdict (binary, partial), reward functions and
                       their weighted sum (--reward), the ordering rule's probe
    program.py         what enters the verifier: Program(source, entry_point, cases, language, model_body)
    sandbox_policy.py  the sandbox's isolation level as a policy (--accept-partial-isolation) and its record
    verify_file.py     `glm53 verify`: a completions file judged in constant memory
"""

from .rewards import reward
from .verifier import SandboxPool, Verdict, verify, verify_many

__all__ = ["SandboxPool", "Verdict", "reward", "verify", "verify_many"]
