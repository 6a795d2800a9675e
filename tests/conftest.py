"""Fixtures: every seq2seq model kind, for the interface tests."""

import pytest

from helpers import make_model


@pytest.fixture(params=["transformer", "transformer-pre", "rnn"])
def seq2seq(request):
    return make_model(request.param)
