"""The seeds' worked examples, reproduced through the public API to their printed precision."""

import torch

from attnkit.attention import attention_scores, basic_self_attention, scaled_dot_product_attention
from attnkit.positional import sinusoidal_encoding
from seed_numbers import SEEDS

# "can you help me to translate this sentence" as seed 000 maps it to integers.
SENTENCE = torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])


def seed_embedding() -> torch.Tensor:
    torch.manual_seed(123)
    embed = torch.nn.Embedding(10, 16)
    return embed(SENTENCE).detach()  # (8, 16)


def test_seed000_basic_self_attention_context_vector_of_word_2():
    z, alpha = basic_self_attention(seed_embedding())
    expected = torch.tensor(SEEDS["basic_context_2"])
    torch.testing.assert_close(z[1], expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(alpha.sum(dim=1), torch.ones(8))


def test_seed000_basic_self_attention_batched_matches_unbatched():
    x = seed_embedding()
    z, alpha = basic_self_attention(torch.stack([x, x.flip(0)]))  # (2, 8, 16)
    z0, _ = basic_self_attention(x)
    torch.testing.assert_close(z[0], z0)
    torch.testing.assert_close(z[1], z0.flip(0))
    assert alpha.shape == (2, 8, 8)


def test_seed000_scaled_dot_product_attention():
    x = seed_embedding()
    torch.manual_seed(123)
    d = x.shape[1]
    U_query, U_key, U_value = torch.rand(d, d), torch.rand(d, d), torch.rand(d, d)
    # The seed writes q_i = U_q x_i for column vectors; for row-vector sequences that is X U_q^T.
    q, k, v = x @ U_query.T, x @ U_key.T, x @ U_value.T  # (8, 16) each

    omega = attention_scores(q, k)
    assert abs(omega[1, 2].item() - 14.3667) < 1e-4
    expected_omega_2 = torch.tensor(SEEDS["omega_2"])
    torch.testing.assert_close(omega[1], expected_omega_2, atol=1e-4, rtol=0)

    out, weights = scaled_dot_product_attention(q, k, v)
    expected_weights_2 = torch.tensor(SEEDS["attention_weights_2"])
    torch.testing.assert_close(weights[1], expected_weights_2, atol=1e-4, rtol=1e-3)
    expected_context_2 = torch.tensor(SEEDS["context_vector_2"])
    torch.testing.assert_close(out[1], expected_context_2, atol=1e-4, rtol=0)


def test_seed000_multihead_key_of_word_2_head_3():
    """Cells [27]-[35]: per-head projections with torch.rand under seed 123."""
    x = seed_embedding()
    torch.manual_seed(123)
    d = x.shape[1]
    torch.rand(d, d)  # one_U_query, drawn first in the seed
    torch.rand(8, d, d)  # multihead_U_query
    multihead_U_key = torch.rand(8, d, d)
    keys = x @ multihead_U_key.transpose(1, 2)  # (H, T, d): keys[h, i] = U_k_h x_i
    expected = torch.tensor(SEEDS["multihead_key_word2_head3"])
    torch.testing.assert_close(keys[2, 1], expected, atol=1e-4, rtol=0)


def test_seed001_positional_encoding_values_d512():
    pe = sinusoidal_encoding(128, 512)
    assert pe.shape == (128, 512)
    # PE(0) = (0, 1, 0, 1, ..., 0, 1)
    torch.testing.assert_close(pe[0, 0::2], torch.zeros(256))
    torch.testing.assert_close(pe[0, 1::2], torch.ones(256))
    # PE(1) = (0.8414, 0.5403, 0.8218, 0.5696, ..., 0.0001, 0.9999), truncated to 4 decimals in the seed
    first = pe[1, :4]
    torch.testing.assert_close(first, torch.tensor([0.8415, 0.5403, 0.8219, 0.5697]), atol=1e-4, rtol=0)
    assert torch.all(torch.trunc(first * 1e4) / 1e4 == torch.tensor([0.8414, 0.5403, 0.8218, 0.5696]))
    assert abs(pe[1, 510].item() - 0.0001) < 1e-4 and abs(pe[1, 511].item() - 0.9999) < 1e-4


def test_positional_encoding_matches_the_formula_elementwise():
    import math

    pe = sinusoidal_encoding(16, 32)
    for pos in (0, 3, 15):
        for i in range(16):
            theta = pos / (10000 ** ((2 * i) / 32))
            assert abs(pe[pos, 2 * i].item() - math.sin(theta)) < 1e-6
            assert abs(pe[pos, 2 * i + 1].item() - math.cos(theta)) < 1e-6
