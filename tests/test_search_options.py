"""One options object (attnkit.decoding.SearchOptions): the command line's decoding flags, the HTTP
schema's fields and the object's fields correspond one to one, with one name, one default and one
set of bounds; every bound is checked in one place, in one line."""

from __future__ import annotations

import dataclasses
import math

import pytest

from attnkit.cli import build_parser
from attnkit.decoding import SearchOptions
from attnkit.decoding.defaults import BOUNDS
from attnkit.errors import ConfigError
from cli_helpers import assert_user_error, cli

FIELDS = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
# translate's flags that are not the search's: what to read, where to write, what decodes it
NOT_SEARCH = {
    "checkpoint",
    "input",
    "prefix_file",
    "split_sentences",
    "output",
    "quantize",
    "engine",
    "compile",
}
NOT_SEARCH |= {"batch_tokens", "device", "help"}


def subparser(name: str):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name]  # type: ignore[attr-defined]


def test_translate_flags_are_the_options_fields():
    actions = {a.dest: a for a in subparser("translate")._actions}
    assert set(actions) - NOT_SEARCH == set(FIELDS)
    for name, default in FIELDS.items():
        action = actions[name]
        assert action.option_strings == ["--" + name.replace("_", "-")]
        assert action.default == default, name


def test_http_fields_are_the_options_fields_with_their_bounds():
    pytest.importorskip("pydantic")
    from attnkit.tasks.translation.routes import TranslateRequest

    fields = TranslateRequest.model_fields
    assert set(fields) - {"text", "model", "prefix", "split_sentences"} == set(FIELDS)
    for name, default in FIELDS.items():
        assert fields[name].default == default, name
    schema = TranslateRequest.model_json_schema()["properties"]
    for name, bound in BOUNDS.items():
        low = schema[name].get("exclusiveMinimum" if bound.open_low else "minimum")
        assert (low, schema[name]["maximum"]) == (bound.low, bound.high), name


def edges(bound):
    """Values at and just inside the bounds (allowed), and beyond them (refused)."""
    step = 1 if bound.kind is int else 1e-9 * max(1.0, abs(bound.high))
    inside = [bound.high, bound.low + step if bound.open_low else bound.low]
    outside = [bound.high + step, bound.low if bound.open_low else bound.low - step]
    if bound.kind is float:
        outside += [math.nan, math.inf, -math.inf, 1e308 * 10]
    else:
        outside += [10**30, -(10**30), 1.5, True]
    return inside, outside


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_every_bound_is_held_in_one_line(name):
    inside, outside = edges(BOUNDS[name])
    sample = name in ("temperature", "top_k", "top_p", "seed")
    nbest = {"beam": 1} if name == "nbest" else {}
    for value in inside:
        options = SearchOptions(**{name: value, "sample": sample or name == "nbest", **nbest})
        assert getattr(options, name) == value
    for value in outside:
        with pytest.raises(ConfigError, match=f"^{name} must be ") as e:
            SearchOptions(**{name: value, "sample": sample})
        assert "\n" not in str(e.value)


def test_sampling_options_need_sample_and_nbest_needs_the_beam():
    for shaping in ({"temperature": 0.8}, {"top_k": 5}, {"top_p": 0.9}):
        with pytest.raises(ConfigError, match="shape sampling: ask for it with sample"):
            SearchOptions(**shaping)
        SearchOptions(sample=True, **shaping)
    with pytest.raises(ConfigError, match="nbest 5 must be between 1 and the beam size 4"):
        SearchOptions(nbest=5)
    assert SearchOptions(nbest=5, sample=True).sampling is not None
    with pytest.raises(ConfigError, match="unknown search option"):
        SearchOptions.of(beam_size=3)
    assert SearchOptions.of(SearchOptions(beam=2), nbest=2) == SearchOptions(beam=2, nbest=2)


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--temperature", "0.8"], ["--temperature", "--sample"]),
        (["--beam", "2", "--nbest", "3"], ["--nbest 3", "beam size 2"]),
        (["--top-p", "0"], ["--top-p", "over 0"]),
        (["--seed", str(2**64)], ["--seed"]),
    ],
)
def test_translate_flags_are_checked_before_the_checkpoint_is_read(capsys, tmp_path, flags, fragments):
    code, _, err = cli(capsys, "translate", "--checkpoint", tmp_path / "missing.pt", *flags)
    assert_user_error(code, err, *fragments)


def test_engines_declare_what_they_refuse_and_the_doors_ask_them(capsys, tmp_path):
    from attnkit.tasks.translation.ct2_engine import CT2Translator
    from attnkit.tasks.translation.translator import Translator

    every = [
        SearchOptions(sample=True, nbest=3, temperature=0.5),
        SearchOptions(beam=4, min_length=3, no_repeat_ngram_size=2),
        SearchOptions(beam=1, min_length=3),
    ]
    assert all(Translator.refuses(o, attention=True) is None for o in every)  # torch decodes all
    assert CT2Translator.refuses(every[0]) is not None and "sample" in CT2Translator.refuses(every[0])
    assert "min length" in CT2Translator.refuses(every[1])
    assert CT2Translator.refuses(every[2]) is None  # beam 1 takes a min length
    assert "attention" in CT2Translator.refuses(SearchOptions(), attention=True)
    # the command line asks the declaration before the checkpoint is read
    missing = tmp_path / "missing.pt"
    code, _, err = cli(capsys, "translate", "--checkpoint", missing, "--engine", "ctranslate2", "--sample")
    assert_user_error(code, err, "--engine ctranslate2", "sample")
    assert "missing.pt" not in err


def test_translate_generate_and_caption_take_the_same_flags_and_fields():
    """One options object: every decoding command and endpoint takes every SearchOptions field, under
    its name, with its task's defaults, on the command line and in the HTTP schema alike."""
    pytest.importorskip("pydantic")
    from attnkit.tasks.captioning.captioner import SEARCH as CAPTION
    from attnkit.tasks.captioning.routes import CaptionQuery
    from attnkit.tasks.language_model.generator import SEARCH as LM
    from attnkit.tasks.language_model.routes import GenerateRequest
    from attnkit.tasks.translation.routes import TranslateRequest

    doors = [("translate", SearchOptions(), TranslateRequest), ("generate", LM, GenerateRequest)]
    doors.append(("caption", CAPTION, CaptionQuery))
    for command, defaults, request in doors:
        actions = {a.dest: a for a in subparser(command)._actions}
        for name in FIELDS:
            assert actions[name].option_strings[0] == "--" + name.replace("_", "-"), (command, name)
            assert actions[name].default == request.model_fields[name].default, (command, name)
            if name != "sample":
                assert actions[name].default == getattr(defaults, name), (command, name)
    # the names before, kept as aliases
    assert GenerateRequest(text="a", nbest=3, max_new_tokens=5).max_len_b == 5
    old = GenerateRequest.model_validate({"text": "a", "num_samples": 3, "max_tokens": 5})
    assert (old.nbest, old.max_len_b) == (3, 5)
    actions = {a.dest: a for a in subparser("generate")._actions}
    assert actions["nbest"].option_strings == ["--nbest", "--num-samples"]
    assert actions["max_len_b"].option_strings == ["--max-len-b", "--max-new-tokens"]


def test_every_search_function_defaults_to_the_one_declaration():
    """The thin search functions, the pool, validation and the scoring functions take their keyword
    defaults from ``attnkit.decoding.defaults``, as ``SearchOptions`` does: no default said twice."""
    import inspect

    from attnkit.decoding import beam_decode, beam_search, greedy_decode, greedy_search, sample_search
    from attnkit.decoding.continuous import BeamPool
    from attnkit.tasks.captioning import scoring as caption_scoring
    from attnkit.tasks.translation import scoring as translation_scoring
    from attnkit.train.config import ValidConfig

    default = SearchOptions()
    names = {"beam_size": default.beam, "beam": default.beam, "num_samples": default.nbest}
    names |= {
        f: getattr(default, f)
        for f in ("length_penalty", "max_len_a", "max_len_b", "temperature", "top_k", "top_p")
    }
    checked = 0
    functions = [beam_decode, beam_search, greedy_decode, greedy_search, sample_search, BeamPool.__init__]
    functions += [translation_scoring.evaluate, caption_scoring.evaluate, ValidConfig]
    for function in functions:
        for name, parameter in inspect.signature(function).parameters.items():
            greedy_validation = function is ValidConfig and name == "beam_size"  # validation's own: 1
            if name in names and parameter.default is not inspect.Parameter.empty and not greedy_validation:
                assert parameter.default == names[name], (function, name, parameter.default)
                checked += 1
    assert checked >= 15
