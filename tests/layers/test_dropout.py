import numpy as np
import pytest

from keras_transformer.layers import Dropout
from keras_transformer.layers.dropout import _traced_by_tensorflow_without_xla, keyed_hash
from tests.helpers import assert_config_roundtrip, to_numpy

UINT32 = 2**32 - 1


def lowbias32(x):
    """C. Wellons' lowbias32 on Python integers, as published."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & UINT32
    x ^= x >> 15
    x = (x * 0x846CA68B) & UINT32
    return x ^ (x >> 16)


def dropped(rate, x, seed=0):
    return to_numpy(Dropout(rate, seed=seed)(x, training=True))


def correlation(a, b):
    return np.corrcoef(a.ravel(), b.ravel())[0, 1]


def test_keyed_hash_equals_the_uint32_arithmetic_it_stands_for():
    counters = np.array([0, 1, 2, 3, 1000, 2**16 - 1, 2**16, 2**31 - 2, 2**31 - 1], "int32")
    for key in ([0, 0], [1, 2], [2**31 - 2, 123456789], [987654321, 2**31 - 2]):
        got = to_numpy(keyed_hash(counters, np.array(key, "int32"))).view("uint32")
        want = [lowbias32(lowbias32((int(c) + key[0]) & UINT32) ^ key[1]) for c in counters]
        np.testing.assert_array_equal(got, np.array(want, "uint32"))


def test_keyed_hash_bits_are_uniform_and_neighbours_independent():
    bits = to_numpy(keyed_hash(np.arange(2**18, dtype="int32"), np.array([7, 11], "int32")))
    bits = bits.view("uint32")
    # Every bit is set half the time, within 5 standard deviations.
    frequencies = ((bits[:, None] >> np.arange(32)) & 1).mean(0)
    assert np.abs(frequencies - 0.5).max() < 5 * 0.5 / np.sqrt(bits.size)
    # The high byte of each 16-bit half fills 256 bins evenly: chi-square
    # with 255 degrees of freedom (mean 255, sd 22.6), below mean + 5 sd.
    for half in (bits & 0xFFFF, bits >> 16):
        counts = np.bincount(half >> 8, minlength=256)
        expected = bits.size / 256
        assert ((counts - expected) ** 2 / expected).sum() < 255 + 5 * 22.6
    # Consecutive counters and the two halves of one hash are uncorrelated.
    low, high = (bits & 0xFFFF).astype(float), (bits >> 16).astype(float)
    bound = 5 / np.sqrt(bits.size)
    assert abs(correlation(low[:-1], low[1:])) < bound
    assert abs(correlation(low, high)) < bound


@pytest.mark.parametrize("rate, keep", [(0.1, 58982 / 65536), (0.5, 0.5), (0.3, 45875 / 65536)])
def test_keeps_one_minus_rate_and_scales_by_the_rounded_keep(rate, keep):
    x = np.random.default_rng(0).normal(size=(64, 40, 129)).astype("float32")  # odd width
    y = dropped(rate, x)
    kept = y != 0
    # 330,240 elements: the kept fraction is within 5 standard deviations.
    sd = np.sqrt(keep * (1 - keep) / x.size)
    assert abs(kept.mean() - keep) < 5 * sd
    np.testing.assert_allclose(y[kept], x[kept] / keep, rtol=1e-6)
    assert abs(keep - (1 - rate)) <= 2**-17  # the rate rounded to 2^-16


def test_neighbouring_elements_are_dropped_independently():
    kept = dropped(0.5, np.ones((256, 512), "float32")) != 0
    bound = 5 / np.sqrt(kept.size / 2)
    # The two elements of a pair share one hash (its low and high halves).
    assert abs(correlation(kept[:, 0::2], kept[:, 1::2])) < bound
    # Neighbouring pairs, and the same column on neighbouring rows.
    assert abs(correlation(kept[:, 0:-2:2], kept[:, 2::2])) < bound
    assert abs(correlation(kept[:-1], kept[1:])) < bound
    # Every column is kept about half the time (no column is stuck).
    sd = 0.5 / np.sqrt(kept.shape[0])
    assert np.abs(kept.mean(0) - 0.5).max() < 5 * sd


def test_masks_differ_between_calls_and_seeds_and_are_reproducible():
    x = np.ones((64, 64), "float32")
    layer = Dropout(0.5, seed=3)
    first, second = (to_numpy(layer(x, training=True)) != 0 for _ in range(2))
    other_seed = dropped(0.5, x, seed=4) != 0
    bound = 5 / np.sqrt(x.size)
    assert abs(correlation(first, second)) < bound
    assert abs(correlation(first, other_seed)) < bound
    np.testing.assert_array_equal(first, dropped(0.5, x, seed=3) != 0)


def test_identity_at_inference_and_at_rate_zero():
    x = np.random.default_rng(1).normal(size=(3, 5)).astype("float32")
    np.testing.assert_array_equal(to_numpy(Dropout(0.5)(x, training=False)), x)
    np.testing.assert_array_equal(to_numpy(Dropout(0.0)(x, training=True)), x)


def test_a_new_rate_draws_the_masks_of_a_layer_built_with_it():
    x = np.ones((8, 64), "float32")
    layer = Dropout(0.0, seed=3)
    np.testing.assert_array_equal(to_numpy(layer(x, training=True)), x)  # draws nothing
    layer.rate = 0.25
    np.testing.assert_array_equal(to_numpy(layer(x, training=True)), dropped(0.25, x, seed=3))
    assert layer.get_config()["rate"] == 0.25
    with pytest.raises(ValueError, match="rate=1.5"):
        layer.rate = 1.5
    assert layer.rate == 0.25


def test_a_variable_rate_masks_as_the_fixed_one_at_every_rate():
    x = np.random.default_rng(2).normal(size=(16, 33)).astype("float32")
    layer = Dropout(0.0, seed=5)
    layer.variable_rate = True
    state = to_numpy(layer.seed_generator.state)
    np.testing.assert_array_equal(to_numpy(layer(x, training=True)), x)  # keeps all...
    assert (to_numpy(layer.seed_generator.state) != state).any()  # ...from a drawn mask
    for rate in (0.1, 0.5):
        layer, fixed = Dropout(rate, seed=5), Dropout(rate, seed=5)
        layer.variable_rate = True
        np.testing.assert_allclose(to_numpy(layer(x, training=True)),
                                   to_numpy(fixed(x, training=True)), rtol=1e-7)
    layer.rate = 1 - 2**-20  # threshold 0: nothing kept, and no 1 / 0
    np.testing.assert_array_equal(to_numpy(layer(x, training=True)), np.zeros_like(x))
    # The threshold is state, not a weight: no parameter, nothing saved.
    assert (layer.weights, int(to_numpy(layer.keep_threshold))) == ([], 0)
    assert any(v is layer.keep_threshold for v in layer.non_trainable_variables)
    store = {}
    layer.save_own_variables(store)
    assert list(store) == ["seed_generator_state"]


def test_tensorflow_graphs_without_xla_take_keras_random_dropout():
    # There each of the hash's integer operations is a kernel of its own;
    # the layer takes keras.random's stateless dropout at the exact rate.
    # Under XLA, and on the other backends, it keeps the hash.
    import keras

    if keras.backend.backend() != "tensorflow":
        assert not _traced_by_tensorflow_without_xla()
        return
    import tensorflow as tf

    x = np.ones((256, 256), "float32")
    layer = Dropout(0.3, seed=4)
    graph = tf.function(lambda x: layer(x, training=True), jit_compile=False)
    xla = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    state = to_numpy(layer.seed_generator.state)
    y = to_numpy(graph(x))
    assert abs((y == 0).mean() - 0.3) < 0.01  # 65,536 draws: standard deviation 0.0018
    # Scaled by 1 / 0.7, not by the hash's rounded 65536 / 45875 (6e-6 more).
    np.testing.assert_allclose(y[y > 0], 1 / 0.7, rtol=1e-6)
    assert (to_numpy(layer.seed_generator.state) != state).any()
    assert (to_numpy(graph(x)) != y).any()  # the next call, the next mask
    layer.seed_generator.state.assign(state)  # the saved state draws the same mask
    np.testing.assert_array_equal(to_numpy(graph(x)), y)
    layer.seed_generator.state.assign(state)
    np.testing.assert_array_equal(to_numpy(xla(x)), dropped(0.3, x, seed=4))
    layer.seed_generator.state.assign(state)  # eager: the hash as well
    np.testing.assert_array_equal(to_numpy(layer(x, training=True)), dropped(0.3, x, seed=4))


def test_config_roundtrip_and_bad_rate():
    clone = assert_config_roundtrip(Dropout(0.2, seed=7, name="residual_dropout"))
    assert (clone.rate, clone.seed) == (0.2, 7)
    for rate in (1.0, -0.1, "0.1"):
        with pytest.raises(ValueError, match=f"rate={rate!r}"):
            Dropout(rate)


def test_the_random_state_survives_a_saved_model(tmp_path):
    # A model loaded from a checkpoint trains on as the saved one would:
    # the same next dropout masks, so the same weights after a step.
    import keras

    import keras_transformer as kt

    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset("tiny", vocabulary_size=50, dropout_rate=0.3)
    model.compile(optimizer="adam", loss=kt.LabelSmoothedCrossEntropy(0.1))
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (4, 7)),
              "decoder_token_ids": rng.integers(1, 50, (4, 6))}
    labels = rng.integers(1, 50, (4, 6))
    for _ in range(3):
        model.train_on_batch(inputs, labels)
    model.save(tmp_path / "checkpoint.keras")
    keras.utils.set_random_seed(1)  # a new process's seeds: none of this run's
    loaded = keras.saving.load_model(tmp_path / "checkpoint.keras")
    states = [to_numpy(layer.seed_generator.state) for layer in model._flatten_layers()
              if isinstance(layer, Dropout)]
    assert len(states) == 11 and any(state[1] > 0 for state in states)  # masks were drawn
    for layer, state in zip((x for x in loaded._flatten_layers() if isinstance(x, Dropout)),
                            states):
        np.testing.assert_array_equal(to_numpy(layer.seed_generator.state), state)
    model.train_on_batch(inputs, labels)
    loaded.train_on_batch(inputs, labels)
    for a, b in zip(model.weights, loaded.weights, strict=True):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=1e-6)
    # Without the saved state the next masks, and so the weights, differ.
    for layer in loaded._flatten_layers():
        if isinstance(layer, Dropout):
            layer.seed_generator.state.assign(
                np.array([12345, 0], layer.seed_generator.state.dtype))
    model.train_on_batch(inputs, labels)
    loaded.train_on_batch(inputs, labels)
    assert max(np.abs(to_numpy(a) - to_numpy(b)).max()
               for a, b in zip(model.weights, loaded.weights)) > 1e-4


def test_attention_dropout_trains_on_batches_whose_length_is_known_at_run_time():
    # tf.data's padded batches have no static length, so in TensorFlow's
    # graph mode the attention weights' last axis is a run-time value.
    import keras
    import tensorflow as tf

    import keras_transformer as kt

    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset("tiny", vocabulary_size=50, dropout_rate=0.0,
                                       attention_dropout=0.1)
    model.compile(optimizer="adam", loss=kt.LabelSmoothedCrossEntropy(0.1), jit_compile=False)
    rng = np.random.default_rng(0)

    def batches():
        for _ in range(2):
            ids = rng.integers(3, 50, (4, 7)).astype("int32")
            yield {"encoder_token_ids": ids, "decoder_token_ids": ids}, ids

    spec = tf.TensorSpec((None, None), tf.int32)
    data = tf.data.Dataset.from_generator(batches, output_signature=(
        {"encoder_token_ids": spec, "decoder_token_ids": spec}, spec))
    before = [to_numpy(w) for w in model.trainable_weights]
    losses = model.fit(data, verbose=0, shuffle=False).history["loss"]
    assert np.all(np.isfinite(losses))
    assert any(not np.allclose(a, to_numpy(b)) for a, b in zip(before, model.trainable_weights))
    # The attention weights are dropped: two training passes differ, inference does not.
    inputs = {"encoder_token_ids": np.full((2, 9), 5), "decoder_token_ids": np.full((2, 9), 7)}
    first, second = (to_numpy(model(inputs, training=True)) for _ in range(2))
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(to_numpy(model(inputs)), to_numpy(model(inputs)))
