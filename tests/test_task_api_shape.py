"""One shape for every task's Python API: each wrapper takes one input or a list of them the same
way (a str is one text, never its characters; an image is a path, bytes, a PIL image or pixels),
takes the same options object, and returns a list with one result per input, in order."""

from __future__ import annotations

import io

import pytest
import torch

from attnkit.decoding import SearchOptions
from attnkit.errors import ConfigError
from attnkit.model import TransformerClassifier
from attnkit.model.captioner import CaptionTransformer
from attnkit.model.config import CaptionerConfig, ClassifierConfig
from attnkit.tasks.captioning import Captioner
from attnkit.tasks.classification import Classifier
from attnkit.tasks.language_model import LanguageModel
from attnkit.tasks.translation import Translator
from decoding_helpers import save_translation, tiny_lm, tiny_tokenizer


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def test_one_text_is_a_list_of_one_for_every_text_task(tok, tmp_path):
    greedy = SearchOptions(beam=1, max_len_b=8)
    translator = Translator.from_checkpoint(save_translation(tmp_path / "mt.pt", tok), device="cpu")
    assert translator.translate("a dog runs", greedy) == translator.translate(["a dog runs"], greedy)
    lm = LanguageModel(tiny_lm(tok), tok, "cpu")
    one = lm.generate("A dog", SearchOptions(beam=1, max_len_a=0.0, max_len_b=5))
    assert len(one) == 1 and [g.tokens for g in one[0]] == [
        g.tokens for g in lm.generate(["A dog"], SearchOptions(beam=1, max_len_a=0.0, max_len_b=5))[0]
    ]
    torch.manual_seed(0)
    config = ClassifierConfig.preset("tiny", vocab_size=tok.src_vocab_size, n_classes=2)
    clf = Classifier(TransformerClassifier(config), tok, ["no", "yes"], "cpu")
    text = "Two dogs play in the snow"  # spaces inside: one text, not characters
    assert clf.predict(text, top_k=2) == clf.predict([text], top_k=2) and len(clf.predict(text)) == 1
    assert clf.predict(("a dog", "two dogs")) == clf.predict([("a dog", "two dogs")])  # one pair
    with pytest.raises(ConfigError, match="expected str or tuple or a list of them"):
        clf.predict(b"bytes")


def test_an_image_is_a_path_bytes_a_pil_image_or_pixels(tok, tmp_path):
    from PIL import Image

    torch.manual_seed(0)
    config = CaptionerConfig.preset("tiny", tgt_vocab_size=tok.tgt_vocab_size)
    captioner = Captioner(CaptionTransformer(config), tok, "cpu")
    picture = Image.new("RGB", (40, 30), (200, 30, 30))
    path = tmp_path / "red.png"
    picture.save(path)
    data = path.read_bytes()
    options = SearchOptions(beam=2, max_len_a=0.0, max_len_b=6)
    want = captioner.caption([str(path)], options)[0].tokens
    for one in (str(path), path, data, picture, captioner.read(picture)):
        (got,) = captioner.caption(one, options)
        assert got.tokens == want, type(one)
    assert [c.tokens for c in captioner.caption([picture, io.BytesIO(data).getvalue()], options)] == [
        want,
        want,
    ]
    with pytest.raises(Exception, match="pixel mode CMYK"):
        captioner.caption(Image.new("CMYK", (8, 8)), options)
