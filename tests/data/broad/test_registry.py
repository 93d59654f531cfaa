"""The built-in registry: size, phrasings, and every primitive's reference in both forms."""

import string

from glm53.data.broad import builtin_registry
from glm53.data.broad.extension import self_check
from glm53.data.broad.registry import TEMPLATE_BUILTINS
from glm53.data.broad.types import TYPES


def test_at_least_forty_primitives_over_all_types():
    registry = builtin_registry()
    assert len(registry.primitives) >= 40
    results = {s.result for s in registry.signatures}
    assert results == set(TYPES)
    for t in TYPES:  # every type can be produced, so every slot can hold a subtree
        assert registry.producers[t]


def test_every_primitive_has_three_phrasings_naming_every_slot():
    for prim in builtin_registry().primitives:
        assert len(prim.phrasings) + len(prim.held_out) >= 3, prim.name
        assert prim.phrasings and prim.held_out, prim.name  # some in the stream, some held out for `phrase`
        for text in prim.phrasings + prim.held_out:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
            assert set(prim.slots) <= fields <= set(prim.slots) | {"item", "items"}, (prim.name, text)
        assert prim.examples, prim.name


def test_every_primitive_yields_a_passing_task_in_each_form():
    registry = builtin_registry()
    for prim in registry.primitives:
        self_check(prim, registry, prim.name)  # raises on a body that fails its cases or the static check


def test_templates_call_only_allowed_builtins():
    from glm53.verify.languages import PYTHON_BUILTINS

    assert TEMPLATE_BUILTINS <= PYTHON_BUILTINS
