import keras
import numpy as np
import pytest

from keras_transformer import WarmupSchedule, transformer_adam
from tests.helpers import to_numpy


def lrate(schedule, step_num):
    """The schedule at the paper's 1-based step number."""
    return float(to_numpy(schedule(step_num - 1)))


def test_paper_values_at_steps_1_4000_8000():
    schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    # 512^-0.5 * 1 * 4000^-1.5
    assert lrate(schedule, 1) == pytest.approx(1.746928e-07, rel=1e-5)
    # the peak: 512^-0.5 * 4000^-0.5
    assert lrate(schedule, 4000) == pytest.approx(6.987712e-04, rel=1e-5)
    # 512^-0.5 * 8000^-0.5 = peak / sqrt(2)
    assert lrate(schedule, 8000) == pytest.approx(4.941059e-04, rel=1e-5)


def test_linear_warmup_then_inverse_square_root():
    schedule = WarmupSchedule(d_model=64, warmup_steps=10)
    rates = np.array([lrate(schedule, s) for s in range(1, 41)])
    np.testing.assert_allclose(rates[:10] / rates[0], np.arange(1, 11), rtol=1e-5)
    np.testing.assert_allclose(
        rates[9:] * np.sqrt(np.arange(10, 41)), rates[9] * np.sqrt(10), rtol=1e-5
    )


def test_paper_adam_and_serialization():
    optimizer = transformer_adam(d_model=512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    restored = keras.optimizers.Adam.from_config(optimizer.get_config())
    assert isinstance(restored.learning_rate, WarmupSchedule) or isinstance(
        restored._learning_rate, WarmupSchedule
    )
    config = WarmupSchedule(256, 100, 2.0).get_config()
    assert WarmupSchedule.from_config(config).get_config() == config


def test_from_peak_keeps_the_shape_and_sets_the_peak():
    paper = WarmupSchedule(d_model=64, warmup_steps=200)
    assert paper.peak == pytest.approx(64 ** -0.5 * 200 ** -0.5)  # 8.84e-3
    schedule = WarmupSchedule.from_peak(64, 200, peak=2e-3)
    assert schedule.peak == pytest.approx(2e-3)
    assert lrate(schedule, 200) == pytest.approx(2e-3, rel=1e-5)
    for step_num in (1, 50, 200, 800):
        assert lrate(schedule, step_num) == pytest.approx(
            lrate(paper, step_num) * 2e-3 / paper.peak, rel=1e-5)
    optimizer = transformer_adam(64, 200, peak=2e-3)
    assert float(to_numpy(optimizer.learning_rate)) == pytest.approx(lrate(schedule, 1))
    with pytest.raises(ValueError, match="peak=0"):
        WarmupSchedule.from_peak(64, 200, peak=0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(d_model=0), "d_model=0"),
    (dict(d_model=512, warmup_steps=-1), "warmup_steps=-1"),
    (dict(d_model=512, scale=0.0), "scale=0.0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupSchedule(**kwargs)
