"""Special ids and vocabulary sizes come from the tokenizer alone (issue: three sources of truth).

A model key that contradicts the tokenizer is an error naming the key; an equal one is accepted;
nothing is silently overwritten; batches and the validation loss use the tokenizer's ids.
"""

import pytest

from attnkit.data.tokenizer import SubwordTokenizer, Vocabulary
from attnkit.errors import ConfigError
from attnkit.tasks.translation import TranslationTask
from attnkit.train import load_config


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.pad_id=5", "model.pad_id"),
        ("model.eos_id=100", "model.eos_id"),  # was rejected as "below 64", a placeholder vocabulary
        ("model.bos_id=2", "model.bos_id"),
        ("model.src_vocab_size=1234", "model.src_vocab_size"),
        ("model.tgt_vocab_size=9000", "model.tgt_vocab_size"),
    ],
)
def test_a_model_key_that_contradicts_the_tokenizer_is_an_error_naming_it(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ".*contradicts the tokenizer"):
        load_config(None, [override, "tokenizer.vocab_size=8000"])


def test_keys_equal_to_the_tokenizer_are_accepted():
    cfg = load_config(None, ["model.pad_id=0", "model.eos_id=2", "model.src_vocab_size=8000"])
    model_cfg = cfg.model_config(Vocabulary(8000, 8000))
    assert (model_cfg.pad_id, model_cfg.eos_id, model_cfg.src_vocab_size) == (0, 2, 8000)


def test_the_trained_vocabulary_is_checked_again_and_never_overwritten():
    """A tokenizer that trained fewer pieces than asked (tiny corpus) contradicts an explicit model key."""
    cfg = load_config(None, ["model.src_vocab_size=8000"])
    with pytest.raises(ConfigError, match="model.src_vocab_size = 8000 contradicts the tokenizer's 700"):
        cfg.model_config(Vocabulary(700, 700))
    assert load_config(None, []).model_config(Vocabulary(700, 650)).tgt_vocab_size == 650


def test_batches_take_their_ids_from_the_tokenizer():
    tok = SubwordTokenizer.train(["ein hund", "zwei katzen"] * 20, ["a dog", "two cats"] * 20, vocab_size=30)
    task = TranslationTask(load_config(None, []))
    batch = task.collate([([5, 6, 7], [8]), ([9], [10, 11])], tok)
    v = tok.vocabulary
    assert batch.tgt_in[:, 0].tolist() == [v.bos_id, v.bos_id]
    assert batch.tgt_out[0].tolist() == [8, v.eos_id, v.pad_id] and batch.src[1].tolist() == [
        9,
        v.pad_id,
        v.pad_id,
    ]
