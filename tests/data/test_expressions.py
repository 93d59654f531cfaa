from glm53.data.expressions import (HELDOUT_POOL, STRUCTURES, TRAIN_POOL, heldout_batch, item_order, render_example)
from glm53.data.pretrain_batches import IGNORE_INDEX
from glm53.data.tokenizer import ByteTokenizer
from glm53.model.config import ModelConfig
from glm53.model.model import GLM53


def test_structures_and_pools_as_the_reference():
    assert len(STRUCTURES) == 120 and len(set(STRUCTURES)) == 120
    assert all(len(set(s)) >= 2 for s in STRUCTURES)
    assert len(TRAIN_POOL) == 88 and len(HELDOUT_POOL) == 32 and not set(TRAIN_POOL) & set(HELDOUT_POOL)
    assert HELDOUT_POOL[:3] == [("neg", "neg", "add"), ("neg", "add", "abs"), ("sub", "neg", "add")]


def test_the_two_verified_example_texts():
    assert render_example(("add", "add", "abs"), 0, 11) == (
        "Task: start with x. Increase it by 5. Add 4. Make the result nonnegative.\nPython: abs(((x + 5) + 4))\n")
    assert render_example(HELDOUT_POOL[0], 100000, 11 + 999) == (
        "Task: start with x. Negate it. Negate it. Add 3.\nPython: ((-(-x)) + 3)\n")


def test_orders_hold_the_same_items_where_the_reference_says_so():
    interleaved = item_order("diverse-88", 200, 24)
    blocked = item_order("diverse-blocked", 200, 24)
    assert sorted(blocked, key=lambda x: x[1]) == interleaved and blocked != interleaved
    assert blocked[0][0] == blocked[54][0] == TRAIN_POOL[0] and blocked[55][0] == TRAIN_POOL[1]  # 4800/88 blocks
    assert {s for s, _ in item_order("repeated-8", 200, 24)} == set(TRAIN_POOL[:8])
    curriculum = item_order("curriculum-8-to-88", 200, 24)
    assert {s for s, _ in curriculum[:2400]} == set(TRAIN_POOL[:8]) and curriculum[2400] == interleaved[2400]
    lengths = [len(ByteTokenizer().encode(render_example(s, i, 11), bos=True, eos=True)) for s, i in interleaved]
    assert min(lengths) == 72 and max(lengths) == 124  # reference: 72-124 tokens with BOS/EOS


def test_heldout_targets_are_the_answer_and_eos_only():
    inputs, labels = heldout_batch(11, 128)
    tok = ByteTokenizer()
    row = [t for t in labels[0].tolist() if t != IGNORE_INDEX]
    assert tok.decode(row) == "((-(-x)) + 3)\n" and row[-1] == tok.eos_id


def test_miniature_count_and_pattern():
    cfg = ModelConfig.named("miniature")
    assert GLM53(cfg).parameter_counts() == {"total": 248_412, "active": 123_996}
    assert cfg.layer_pattern == "LLL"  # 3 layers: the L L L S rhythm never reaches a sparse layer
