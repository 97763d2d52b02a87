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


def test_under_accumulation_the_schedule_counts_updates():
    # Keras calls the schedule with the micro-batch count; the paper's step
    # number is the update's.
    per_update = WarmupSchedule(d_model=64, warmup_steps=10)
    accumulated = WarmupSchedule(d_model=64, warmup_steps=10, steps_per_update=4)
    for micro_batch in range(0, 60):
        assert float(to_numpy(accumulated(micro_batch))) == pytest.approx(
            float(to_numpy(per_update(micro_batch // 4))), rel=1e-6)
    config = accumulated.get_config()
    assert WarmupSchedule.from_config(config).steps_per_update == 4


def test_accumulated_batches_make_the_update_of_their_union():
    # Two batches of 4 rows accumulated into one update, against one batch
    # of their 8 rows: the same mean gradient, so the same weights.
    import keras_transformer as kt

    rng = np.random.default_rng(0)
    source = rng.integers(4, 50, (8, 6)).astype("int32")
    target = rng.integers(4, 50, (8, 7)).astype("int32")  # no padding: equal means

    def trained(steps_per_update, batches):
        keras.utils.set_random_seed(1)
        model = kt.Transformer(vocabulary_size=50, num_layers=1, d_model=16, num_heads=2,
                               d_ff=32, dropout_rate=0.0, max_length=16)
        model.compile(optimizer=transformer_adam(16, 4, peak=1e-2,
                                                 gradient_accumulation_steps=steps_per_update),
                      loss=kt.LabelSmoothedCrossEntropy(0.1))
        for _ in range(2):  # two updates
            for rows in batches:
                model.train_on_batch(
                    {"encoder_token_ids": source[rows], "decoder_token_ids": target[rows, :-1]},
                    target[rows, 1:])
        assert int(to_numpy(model.optimizer.iterations)) == 2
        # Not the key biases: a softmax ignores what they add to every
        # score, so their gradient is zero up to rounding, which Adam
        # divides by its own size (sign-like steps of either sign).
        return [to_numpy(w) for w in model.trainable_weights
                if not w.path.endswith("key/bias")]

    one = trained(1, [slice(0, 8)])
    accumulated = trained(2, [slice(0, 4), slice(4, 8)])
    for a, b in zip(one, accumulated, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-6)
    # Without accumulation the second half-batch would be an update of its own.
    assert max(np.abs(a - b).max() for a, b in zip(one, trained(1, [slice(0, 4)]))) > 1e-3


def test_accumulation_steps_must_be_positive():
    with pytest.raises(ValueError, match="gradient_accumulation_steps=0"):
        transformer_adam(64, gradient_accumulation_steps=0)
