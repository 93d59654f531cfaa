"""Work a lower floor asks for by role and a higher floor provides (dependency inversion).

The house's floors import only downward (tests/test_layout.py), yet a few things users reach from a lower floor
are built on a higher one: `GLM53.generate` (model/, floor 1) runs the decoding engine (decode/, floor 3). Here the
lower floor asks for the role ("text generation") and gets a function; it never names the module that holds it.
Who provides what is decided above, by the package face (glm53/__init__.py), which Python runs before any
submodule, so every way in (`from glm53.model.model import GLM53` included) finds the roles registered.

A provider is registered as a loader: a function of no arguments that imports its module and returns the work.
Registering costs nothing (importing glm53 loads no torch); the module loads on the first call of the role.

Simplifications: one provider a role, the last one registered wins (a test may put its own in place); the loader
runs on every ask, which after the first is a lookup of a module already loaded.
"""

from __future__ import annotations

from collections.abc import Callable

# role -> the loader that returns the function doing it
_LOADERS: dict[str, Callable[[], Callable]] = {}


def provide(role: str, loader: Callable[[], Callable]) -> None:
    """Register `loader` (no arguments, returns the function) as the provider of `role`."""
    _LOADERS[role] = loader


def provider(role: str) -> Callable:
    """The function that does `role`, loaded on first ask; a LookupError of one line when none is registered."""
    loader = _LOADERS.get(role)
    if loader is None:
        raise LookupError(f"no provider of {role!r} is registered (the roles provided: "
                          f"{', '.join(sorted(_LOADERS)) or 'none'}); import glm53 (its package face registers them) "
                          f"or call glm53.runtime.providers.provide")
    return loader()
