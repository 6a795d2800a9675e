"""The seeds' worked examples, reproduced through the public API to their printed precision."""

import torch

from attnkit.attention import attention_scores, basic_self_attention, scaled_dot_product_attention
from attnkit.positional import sinusoidal_encoding

# "can you help me to translate this sentence" as seed 000 maps it to integers.
SENTENCE = torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])


def seed_embedding() -> torch.Tensor:
    torch.manual_seed(123)
    embed = torch.nn.Embedding(10, 16)
    return embed(SENTENCE).detach()  # (8, 16)


def test_seed000_basic_self_attention_context_vector_of_word_2():
    z, alpha = basic_self_attention(seed_embedding())
    expected = torch.tensor(
        [
            -9.3975e-01,
            -4.6856e-01,
            1.0311e00,
            -2.8192e-01,
            4.9373e-01,
            -1.2896e-02,
            -2.7327e-01,
            -7.6358e-01,
            1.3958e00,
            -9.9543e-01,
            -7.1287e-04,
            1.2449e00,
            -7.8077e-02,
            1.2765e00,
            -1.4589e00,
            -2.1601e00,
        ]
    )
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
    expected_omega_2 = torch.tensor([-25.1623, 9.3602, 14.3667, 32.1482, 53.8976, 46.6626, -1.2131, -32.9392])
    torch.testing.assert_close(omega[1], expected_omega_2, atol=1e-4, rtol=0)

    out, weights = scaled_dot_product_attention(q, k, v)
    expected_weights_2 = torch.tensor(
        [2.2317e-09, 1.2499e-05, 4.3696e-05, 3.7242e-03, 8.5596e-01, 1.4026e-01, 8.8897e-07, 3.1935e-10]
    )
    torch.testing.assert_close(weights[1], expected_weights_2, atol=1e-4, rtol=1e-3)
    expected_context_2 = torch.tensor(
        [
            -1.2226,
            -3.4387,
            -4.3928,
            -5.2125,
            -1.1249,
            -3.3041,
            -1.4316,
            -3.2765,
            -2.5114,
            -2.6105,
            -1.5793,
            -2.8433,
            -2.4142,
            -0.3998,
            -1.9917,
            -3.3499,
        ]
    )
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
    expected = torch.tensor(
        [
            -1.9619,
            -0.7701,
            -0.7280,
            -1.6840,
            -1.0801,
            -1.6778,
            0.6763,
            0.6547,
            1.4445,
            -2.7016,
            -1.1364,
            -1.1204,
            -2.4430,
            -0.5982,
            -0.8292,
            -1.4401,
        ]
    )
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
