"""Multi-token prediction: the block, its loss, its cache, and self-speculative greedy decoding."""

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.decode.speculative import generate_greedy_plain, generate_greedy_speculative
from tests.tiny import TINY

PROMPTS = ["def f(x):", "# Return x.\ndef g(x):", "ab", "def reverse_words(s):\n    "]


def _model(**over):
    torch.manual_seed(0)
    return GLM53(ModelConfig(**{**TINY, "max_sequence_length": 96}, mtp_depth=1, **over)).double()


def test_mtp_logits_at_t_predict_token_t_plus_2_and_see_nothing_later():
    model = _model()
    ids = torch.randint(4, 260, (2, 30))
    _, aux = model(ids, return_aux=True)
    assert aux.mtp_logits.shape == (2, 29, 260)
    changed = ids.clone()
    changed[:, 20:] = torch.randint(4, 260, (2, 10))
    _, aux2 = model(changed, return_aux=True)
    # position t reads tokens up to t+1: positions 0..18 cannot see a change at 20
    torch.testing.assert_close(aux.mtp_logits[:, :19], aux2.mtp_logits[:, :19])
    assert not torch.allclose(aux.mtp_logits[:, 19], aux2.mtp_logits[:, 19])
    assert GLM53(ModelConfig(**TINY))(ids, return_aux=True)[1].mtp_logits is None


@pytest.mark.parametrize("over", [{}, dict(linear_attention="kda")])
def test_mtp_cache_steps_equal_the_full_forward(over):
    model = _model(**over)
    ids = torch.randint(4, 260, (1, 25))
    _, aux = model(ids, return_aux=True)
    _, hidden = model(ids, return_hidden=True)
    cache = model.new_mtp_cache(1, 40)
    first = model.mtp_step(hidden[:, :10], ids[:, 1:11], cache)
    rest = [model.mtp_step(hidden[:, t:t + 1], ids[:, t + 1:t + 2], cache) for t in range(10, 24)]
    torch.testing.assert_close(torch.cat([first] + rest, dim=1), aux.mtp_logits)


RELEASED = dict(linear_attention="kda", sparse_selection="indexer", indexer_top_k=4, position="none", residual="mhc",
                router="sigmoid-bias", tie_embeddings=False)


@pytest.mark.parametrize("over,use_stop", [({}, False), ({}, True), (RELEASED, False)])
def test_speculative_greedy_equals_plain_greedy_token_for_token(over, use_stop):
    from glm53.decode.engine import generate_groups
    from glm53.decode.generate import Sampling, function_body_complete

    model = _model(**over)
    stop = function_body_complete if use_stop else None
    fast, stats = generate_greedy_speculative(model, PROMPTS, 24, stop=stop)
    plain, plain_stats = generate_greedy_plain(model, PROMPTS, 24, stop=stop)
    engine = [g[0] for g in generate_groups(model, PROMPTS, 1, Sampling(temperature=0.0, max_new_tokens=24), stop=stop)]
    assert fast == plain == engine
    assert stats["tokens"] == plain_stats["tokens"] and 0 <= stats["accepted"] <= stats["drafted"]


def test_accepted_and_rejected_drafts_both_keep_the_plain_greedy_output():
    # an untrained draft is rarely right; make every other draft an oracle's (plain greedy's own next-next token)
    # so that both branches of the loop run
    from glm53.data.tokenizer import ByteTokenizer

    model, prompt = _model(), PROMPTS[1]
    plain, _ = generate_greedy_plain(model, [prompt], 24)
    target, P = plain[0]["token_ids"], len(ByteTokenizer().encode(prompt, bos=True))
    draft = model.mtp_step

    def half_oracle(hidden, next_ids, cache):
        n = int(cache.positions[0]) - (P - 1) + next_ids.shape[1]  # the completion index the last pair predicts
        logits = draft(hidden, next_ids, cache).clone()
        if n < len(target) and n % 2 == 0:
            logits[:, -1] = -1e9
            logits[:, -1, target[n]] = 0.0
        return logits

    model.mtp_step = half_oracle
    out, stats = generate_greedy_speculative(model, [prompt], 24)
    assert out == plain
    assert 0 < stats["accepted"] < stats["drafted"], stats
    assert stats["forwards"] < 1 + 2 * stats["drafted"]  # accepted drafts saved forwards


@pytest.mark.slow
def test_mtp_loss_trains_and_short_sequences_are_refused(tmp_path):
    import json

    from glm53.train.pretrain import pretrain
    from glm53.train.pretrain_config import PretrainConfig

    model = ModelConfig(**{**TINY, "max_sequence_length": 160}, mtp_depth=1)
    pretrain(PretrainConfig(out=str(tmp_path / "r"), steps=2, checkpoints=(2,), batch_size=2, sequence_length=128,
                            progress=False, device="cpu", model=model), dev_tasks=[], log=lambda *_: None)
    rows = [json.loads(line) for line in (tmp_path / "r" / "train_log.jsonl").read_text().splitlines()]
    assert all(r["mtp_loss"] > 0 for r in rows)
    with pytest.raises(ValueError, match="too short for --mtp-depth 1"):
        PretrainConfig(out="x", sequence_length=2, model=model)
    with pytest.raises(ValueError, match="mtp[_-]depth"):
        ModelConfig(mtp_depth=2)
    with pytest.raises(ValueError, match="max_sequence_length"):
        ModelConfig(mtp_depth=1, max_sequence_length=2)
    with pytest.raises(ValueError, match="MTP block"):
        generate_greedy_speculative(GLM53(ModelConfig(**TINY)), ["x"], 4)
