"""Attention rollout and flow (Abnar and Zuidema, 2020): the residual counted as half of each row,
rollout the product of the layers, flow the maximum flow through them."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention.rollout import flow, rollout, through_encoder, with_residual


def attention(L: int, H: int, S: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(L, H, S, S, generator=g), dim=-1)  # (L, H, S, S)


def test_the_residual_is_half_of_each_row_and_rows_still_sum_to_one():
    w = attention(2, 3, 5)
    mixed = with_residual(w)
    torch.testing.assert_close(mixed, 0.5 * w.mean(1) + 0.5 * torch.eye(5))
    torch.testing.assert_close(mixed.sum(-1), torch.ones(2, 5))


def test_rollout_is_the_product_of_the_layers_top_first():
    w = attention(3, 2, 4)
    m = with_residual(w)
    torch.testing.assert_close(rollout(w), m[2] @ m[1] @ m[0])
    torch.testing.assert_close(rollout(w[:1]), m[0])
    eye = torch.eye(4).expand(2, 2, 4, 4)  # every position attends to itself: nothing mixes
    torch.testing.assert_close(rollout(eye), torch.eye(4))


def test_flow_through_one_layer_is_its_weights_and_through_two_the_sum_of_path_bottlenecks():
    w = attention(1, 2, 4)
    torch.testing.assert_close(flow(w), with_residual(w)[0])
    w = attention(2, 2, 4, seed=1)
    m = with_residual(w).double()
    # from top position i to input j each path passes one middle position k, on edges of its own
    by_hand = torch.minimum(m[1][:, :, None], m[0][None, :, :]).sum(1)  # (S, S): sum_k min(.)
    torch.testing.assert_close(flow(w), (by_hand / by_hand.sum(-1, keepdim=True)).float())


def test_the_decoder_view_follows_the_last_cross_layer_through_the_encoder():
    cross = attention(2, 4, 6)[:, :, :3, :]  # (L, H, T=3, S=6), rows of a softmax over 6
    cross = cross / cross.sum(-1, keepdim=True)
    encoder = attention(2, 4, 6, seed=2)
    torch.testing.assert_close(through_encoder(cross, encoder, "raw"), cross[-1].mean(0))
    view = through_encoder(cross, encoder, "rollout")
    torch.testing.assert_close(view, cross[-1].mean(0) @ rollout(encoder))
    torch.testing.assert_close(view.sum(-1), torch.ones(3))


def test_a_causal_stack_rolls_out_causal_and_raw_is_the_last_layer():
    from attnkit.attention.rollout import mixing

    causal = torch.tril(torch.rand(3, 2, 5, 5)) + torch.eye(5)
    causal = causal / causal.sum(-1, keepdim=True)  # (L, H, T, T), nothing above the diagonal
    for method in ("rollout", "flow"):
        mixed = mixing(causal, method)
        assert torch.equal(mixed.triu(1), torch.zeros(5, 5))  # no position reads a later one
        torch.testing.assert_close(mixed.sum(-1), torch.ones(5))
    torch.testing.assert_close(mixing(causal, "raw"), causal[-1].mean(0))


def test_a_classifier_s_word_weights_follow_the_pooling_through_the_encoder():
    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.model import ClassifierConfig, TransformerClassifier
    from attnkit.tasks.classification import Classifier

    text = [f"{a} {b} ." for a in ("A dog", "Two men", "The cat") for b in ("runs", "sits", "sleeps")]
    with pytest.warns(UserWarning, match="too small"):
        tok = SubwordTokenizer.train(text, text, vocab_size=60)
    for pooling in ("attention", "first"):
        torch.manual_seed(0)
        cfg = ClassifierConfig.preset("tiny", vocab_size=tok.src_vocab_size, n_classes=2, pooling=pooling)
        clf = Classifier(TransformerClassifier(cfg).eval(), tok, ["a", "b"], torch.device("cpu"))
        raw, rolled = clf.word_weights("Two men sit ."), clf.word_weights("Two men sit .", "rollout")
        assert rolled.words == raw.words and rolled.label == raw.label
        assert sum(rolled.weights) == pytest.approx(1.0, abs=1e-5)
        assert rolled.weights != pytest.approx(raw.weights, abs=1e-4)  # the layers below mixed them
        pieces, weights = clf.self_attention("Two men sit .")  # (L, H, T', T')
        mixed = rollout(weights)
        if pooling == "first":  # what the CLS token read, itself left out
            expected = mixed[0, 1:] / mixed[0, 1:].sum()
        else:
            out = clf.model.classify(torch.tensor([clf._encode(["Two men sit ."])[0]]), need_weights=True)
            expected = out.token_weights[0].detach() @ mixed
        assert rolled.weights == pytest.approx(_merged(pieces, expected, pooling), abs=1e-5)


def _merged(pieces, weights, pooling):
    from attnkit.tasks.classification.highlight import merge_subwords

    pieces = pieces[1:] if pooling == "first" else pieces
    return merge_subwords(pieces, weights.tolist())[1]
