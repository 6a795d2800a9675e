"""SubwordTokenizer: round trips, vocab layout, determinism, checkpoint serialization."""

import io
import random
import warnings

import pytest
import torch

from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.errors import CheckpointError, ConfigError, DataError

UMLAUT = "Kannst du mir helfen, diesen Satz zu übersetzen?"


def _corpus(n=300, seed=0):
    """Parallel toy corpus: template sentences sharing vocabulary across languages."""
    rng = random.Random(seed)
    subj = [
        ("The man", "Der Mann"),
        ("The woman", "Die Frau"),
        ("The child", "Das Kind"),
        ("A dog", "Ein Hund"),
        ("A cat", "Eine Katze"),
        ("The girl", "Das Mädchen"),
        ("The doctor", "Die Ärztin"),
    ]
    verb = [
        ("runs across", "läuft über"),
        ("sits on", "sitzt auf"),
        ("plays with", "spielt mit"),
        ("crosses", "überquert"),
        ("drives over", "fährt über"),
    ]
    obj = [
        ("the street", "die Straße"),
        ("the ball", "den Ball"),
        ("the bridge", "die Brücke"),
        ("the big hill", "den großen Hügel"),
        ("the meadow", "die Wiese"),
    ]
    en, de = [], []
    for _ in range(n):
        (s_en, s_de), (v_en, v_de), (o_en, o_de) = rng.choice(subj), rng.choice(verb), rng.choice(obj)
        en.append(f"{s_en} {v_en} {o_en}.")
        de.append(f"{s_de} {v_de} {o_de}.")
    en.append("Can you help me translate this sentence?")
    de.append(UMLAUT)
    return en, de


def _train(**kw):
    en, de = _corpus()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the toy corpus may not reach vocab_size
        return SubwordTokenizer.train(en, de, **kw)


@pytest.fixture(scope="module")
def tok():
    return _train(vocab_size=100)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("joint", [True, False])
def test_round_trip_in_vocabulary(model_type, joint):
    tok = _train(vocab_size=100, model_type=model_type, joint=joint)
    en, de = _corpus()
    for text in [UMLAUT, de[0], "Der Mann läuft über die Straße."]:
        ids = tok.encode(text, side="tgt")
        assert all(i > tok.unk_id for i in ids), "in-vocabulary text must not produce specials/unk"
        assert tok.decode(ids, side="tgt") == text
    assert tok.decode(tok.encode(en[0], side="src"), side="src") == en[0]


def test_special_ids(tok):
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert [tok.id_to_piece(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_encode_adds_no_specials_and_decode_stops_at_eos(tok):
    ids = tok.encode("Der Mann", side="tgt")
    assert tok.bos_id not in ids and tok.eos_id not in ids
    padded = [tok.bos_id] + ids + [tok.eos_id] + tok.encode("Die Frau", side="tgt") + [tok.pad_id] * 3
    assert tok.decode(padded) == "Der Mann"
    assert tok.decode(torch.tensor([tok.bos_id] + ids + [tok.pad_id])) == "Der Mann"
    assert tok.encode_batch(["Der Mann", "Die Frau"], side="tgt") == [ids, tok.encode("Die Frau", "tgt")]


def test_pieces_are_subword_strings(tok):
    pieces = tok.pieces(UMLAUT, side="tgt")
    assert len(pieces) == len(tok.encode(UMLAUT, side="tgt"))
    assert "".join(pieces).replace("\u2581", " ").strip() == UMLAUT


def test_joint_vs_separate_vocab_sizes():
    joint = _train(vocab_size=100, joint=True)
    assert joint.joint and joint.src_vocab_size == joint.tgt_vocab_size == 100
    sep = _train(vocab_size=50, joint=False)
    assert not sep.joint and sep.src_vocab_size == sep.tgt_vocab_size == 50
    # separate models segment the same string differently from each other's vocabulary
    assert sep.pieces("Straße", side="tgt") != sep.pieces("Straße", side="src")


def test_too_large_vocab_shrinks_with_warning():
    en, de = _corpus()
    with pytest.warns(UserWarning, match="vocab_size=8000"):
        tok = SubwordTokenizer.train(en, de, vocab_size=8000)
    assert 4 < tok.src_vocab_size < 8000
    assert tok.decode(tok.encode(UMLAUT, "tgt")) == UMLAUT


def test_training_is_deterministic():
    for model_type in ("unigram", "bpe"):
        a = _train(vocab_size=100, model_type=model_type, joint=False)
        b = _train(vocab_size=100, model_type=model_type, joint=False)
        assert a.state_dict() == b.state_dict()


def test_state_dict_survives_weights_only_checkpoint(tok):
    buf = io.BytesIO()
    torch.save({"tokenizer": tok.state_dict(), "weights": torch.zeros(2)}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)["tokenizer"]
    assert isinstance(state["src"], bytes)
    again = SubwordTokenizer.from_state_dict(state)
    en, de = _corpus()
    assert again.joint == tok.joint and again.src_vocab_size == tok.src_vocab_size
    assert again.encode_batch(de[:20], "tgt") == tok.encode_batch(de[:20], "tgt")
    assert again.encode_batch(en[:20], "src") == tok.encode_batch(en[:20], "src")


def test_separate_state_dict_round_trip():
    sep = _train(vocab_size=50, joint=False)
    again = SubwordTokenizer.from_state_dict(sep.state_dict())
    assert not again.joint
    assert again.encode(UMLAUT, "tgt") == sep.encode(UMLAUT, "tgt")
    assert again.encode("The man", "src") == sep.encode("The man", "src")


def test_user_errors_name_the_culprit():
    en, de = _corpus()
    with pytest.raises(ConfigError, match="model_type"):
        SubwordTokenizer.train(en, de, model_type="word")
    with pytest.raises(ConfigError, match="required_chars"):
        SubwordTokenizer.train(en, de, vocab_size=10)
    with pytest.raises(DataError, match="source corpus is empty"):
        SubwordTokenizer.train([], de)
    with pytest.raises(CheckpointError, match="not a valid SentencePiece"):
        SubwordTokenizer.from_state_dict({"version": 1, "joint": True, "src": b"junk", "tgt": None})
    with pytest.raises(CheckpointError, match="keys"):
        SubwordTokenizer.from_state_dict({"src": b""})
    with pytest.raises(ValueError, match="side"):
        _train(vocab_size=100).encode("x", side="source")
