import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glm53 import ByteTokenizer
from glm53.data.tokenizer import BOS_ID, EOS_ID, FULL_VOCAB_SIZE, IMAGE_IDS, PAD_ID, SEP_ID

tok = ByteTokenizer()


def test_layout_matches_reference():
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id, tok.vocab_size) == (0, 1, 2, 3, 260)
    assert tok.encode("d") == [104] and tok.encode("\n") == [14] and tok.encode(" ") == [36]
    assert len(tok.encode("def increment(x):")) == 17
    assert tok.encode("x", bos=True, eos=True) == [BOS_ID, 124, EOS_ID]
    assert IMAGE_IDS == (260, 261, 262)


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_round_trip_every_string(text):
    assert tok.decode(tok.encode(text, bos=True, eos=True)) == text


@given(st.lists(st.integers(min_value=0, max_value=FULL_VOCAB_SIZE - 1), max_size=64))
@settings(max_examples=300, deadline=None)
def test_decode_never_raises_on_in_range_ids(ids):
    assert isinstance(tok.decode(ids), str)


def test_decode_stops_at_eos_and_skips_specials_and_image_ids():
    ids = [BOS_ID, 4 + ord("a"), PAD_ID, SEP_ID, *IMAGE_IDS, 4 + ord("b"), EOS_ID, 4 + ord("c")]
    assert tok.decode(ids) == "ab"


def test_invalid_utf8_becomes_replacement_character():
    assert tok.decode([4 + 0xFF, 4 + ord("a")]) == "\ufffda"
    assert tok.decode(tok.encode("é")[:1]) == "\ufffd"


@pytest.mark.parametrize("bad", [-1, FULL_VOCAB_SIZE, 10**6])
def test_out_of_range_id_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([5, bad])
