import numpy as np
import pytest

from keras_transformer.layers import Dropout
from tests.helpers import assert_config_roundtrip, to_numpy


def dropped(rate, x, seed=0):
    return to_numpy(Dropout(rate, seed=seed)(x, training=True))


@pytest.mark.parametrize("rate, keep", [(0.1, 29491 / 32768), (0.5, 0.5), (0.3, 22938 / 32768)])
def test_keeps_one_minus_rate_and_scales_by_the_rounded_keep(rate, keep):
    x = np.random.default_rng(0).normal(size=(64, 40, 130)).astype("float32")  # odd halves
    y = dropped(rate, x)
    kept = y != 0
    # 332,800 elements: the kept fraction is within 5 standard deviations.
    sd = np.sqrt(keep * (1 - keep) / x.size)
    assert abs(kept.mean() - keep) < 5 * sd
    np.testing.assert_allclose(y[kept], x[kept] / keep, rtol=1e-6)
    assert abs(keep - (1 - rate)) <= 2**-16  # the rate rounded to 2^-15


def test_the_two_halves_of_each_random_int_are_independent():
    # The first and second halves of the last axis come from the low and
    # high 15 bits of the same draws.
    y = dropped(0.5, np.ones((256, 512), "float32"))
    low, high = (y[:, :256] != 0).ravel(), (y[:, 256:] != 0).ravel()
    assert abs(np.corrcoef(low, high)[0, 1]) < 5 / np.sqrt(low.size)
    # and neither half repeats the other's pattern on another row
    assert abs(np.corrcoef(low[:-256], high[256:])[0, 1]) < 5 / np.sqrt(low.size)


def test_masks_differ_between_calls_and_are_reproducible_from_the_seed():
    layer = Dropout(0.5, seed=3)
    x = np.ones((8, 64), "float32")
    first, second = (to_numpy(layer(x, training=True)) for _ in range(2))
    assert (first != second).mean() > 0.3
    np.testing.assert_array_equal(first, to_numpy(Dropout(0.5, seed=3)(x, training=True)))


def test_identity_at_inference_and_at_rate_zero():
    x = np.random.default_rng(1).normal(size=(3, 5)).astype("float32")
    np.testing.assert_array_equal(to_numpy(Dropout(0.5)(x, training=False)), x)
    np.testing.assert_array_equal(to_numpy(Dropout(0.0)(x, training=True)), x)


def test_config_roundtrip_and_bad_rate():
    clone = assert_config_roundtrip(Dropout(0.2, seed=7, name="residual_dropout"))
    assert (clone.rate, clone.seed) == (0.2, 7)
    for rate in (1.0, -0.1, "0.1"):
        with pytest.raises(ValueError, match=f"rate={rate!r}"):
            Dropout(rate)
