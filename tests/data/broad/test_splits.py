"""Splits: reserved names, held-out pairs and phrasings never in the stream, what each held-out split holds."""

from glm53.data.broad import (FROZEN_SPLITS, IN_DISTRIBUTION, MAX_PER_SPLIT, broad_pretraining_task, builtin_registry,
                         frozen_broad_tasks, held_out_pairs, held_out_phrasings, is_held_out_pair,
                         reserved_suffixes)
from glm53.data.broad.splits import frozen_suffix

STREAM_DOCS = 2000


def _suffix(task):
    return task.entry_point.rsplit("_", 1)[1]


def test_frozen_names_are_reserved_and_distinct():
    reserved = reserved_suffixes()
    assert len(reserved) == len(FROZEN_SPLITS) * MAX_PER_SPLIT  # no two frozen tasks share a suffix
    for split in FROZEN_SPLITS:
        tasks = frozen_broad_tasks(split, 30)
        assert [_suffix(t) for t in tasks] == [frozen_suffix(split, i) for i in range(30)]


def test_stream_avoids_reserved_names_held_out_pairs_and_phrasings():
    registry = builtin_registry()
    reserved, held_phrasings = reserved_suffixes(), held_out_phrasings(registry)
    stream = [broad_pretraining_task(i) for i in range(STREAM_DOCS)]
    assert not {_suffix(t) for t in stream} & reserved
    assert not any(is_held_out_pair(p, c) for t in stream for p, c in t.pairs)
    assert not {pid for t in stream for pid in t.phrasings} & held_phrasings
    assert {t.root for t in stream} == {p.name for p in registry.primitives}  # every primitive is taught
    assert {d for t in stream for d in [t.depth]} == {1, 2, 3}
    assert len({t.entry_point for t in stream}) == STREAM_DOCS


def test_held_out_splits_hold_what_they_say():
    registry = builtin_registry()
    held_phrasings = held_out_phrasings(registry)
    assert 20 <= len(held_out_pairs(registry))
    for task in frozen_broad_tasks("compose", 40):
        assert any(is_held_out_pair(p, c) for p, c in task.pairs) and task.depth >= 2
        assert not set(task.phrasings) & held_phrasings
    for task in frozen_broad_tasks("phrase", 40):
        assert set(task.phrasings) & held_phrasings
        assert not any(is_held_out_pair(p, c) for p, c in task.pairs)
    for split in IN_DISTRIBUTION:
        for task in frozen_broad_tasks(split, 40):
            assert not set(task.phrasings) & held_phrasings
            assert not any(is_held_out_pair(p, c) for p, c in task.pairs)
