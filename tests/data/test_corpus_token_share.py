"""scripts/corpus_token_share.py: a share of corpus rows is a larger share of the loss tokens (a corpus row is a
whole function, a generated row's target its body alone), and no corpus rows means no corpus tokens."""

import json

from ..scripts import load_script


def _script():
    return load_script("corpus_token_share")


def test_a_share_of_corpus_rows_is_a_larger_share_of_the_loss_tokens(tmp_path):
    body = "\n".join(f"    total = total + values[{i}] * {i}" for i in range(12))
    functions = [f'def weighted_{n}(values):\n    """Sum of the values, each times its index."""\n    total = 0\n'
                 f"{body}\n    return total + {n}\n" for n in range(40)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f}) + "\n" for f in functions))
    script = _script()
    generated = script.targets("code", str(corpus), 0.0, 8)
    quarter = script.targets("code", str(corpus), 0.25, 8)
    corpus_share = (quarter - generated * 0.75) / quarter
    assert generated > 0 and 0.5 < corpus_share < 1  # a quarter of the rows, most of the loss
