"""Receipts and logs hold whatever a model wrote, lone surrogates included, and read back exactly."""

import json

from glm53.data.tokenizer import ByteTokenizer
from glm53.runtime.files import atomic_write_json, json_text, read_jsonl, truncate_jsonl

# what the byte tokenizer decodes from the bytes of an encoded lone surrogate: the surrogate itself
ODD = ByteTokenizer().decode(ByteTokenizer().encode("x\udbbcy"))


def test_the_tokenizer_can_produce_a_lone_surrogate():
    assert ODD == "x\udbbcy"
    try:
        ODD.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        raise AssertionError("expected a string UTF-8 cannot encode")


def test_json_text_escapes_only_what_utf8_cannot_hold(tmp_path):
    row = {"completion": ODD, "text": "déjà vu ✓"}
    text = json_text(row)
    assert "déjà vu ✓" in text and "\\udbbc" in text
    assert json.loads(text) == row
    atomic_write_json(tmp_path / "r.json", row)
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == row
    (tmp_path / "log.jsonl").write_text(json_text(row) + "\n" + json_text({"n": 2}) + "\n", encoding="utf-8")
    assert truncate_jsonl(tmp_path / "log.jsonl", lambda r: "completion" in r) == [row]
    assert read_jsonl(tmp_path / "log.jsonl") == [row]
