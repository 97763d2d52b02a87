import keras
import numpy as np
import pytest

from keras_transformer import TokenCount
from tests.helpers import LABELS, LOGITS, to_numpy


def test_token_count_counts_real_tokens_of_nonzero_weight():
    metric = TokenCount()
    metric.update_state(LABELS, LOGITS)
    expected = int(np.count_nonzero(np.asarray(LABELS)))
    assert float(to_numpy(metric.result())) == expected
    metric.update_state(LABELS, LOGITS, sample_weight=np.array([1.0, 0.0]))  # row 0 only
    assert float(to_numpy(metric.result())) == expected + np.count_nonzero(LABELS[0])
    metric.reset_state()
    assert float(to_numpy(metric.result())) == 0.0
    config = metric.get_config()
    assert TokenCount.from_config(config).get_config() == config
    assert config["name"] == "tokens"


@pytest.mark.parametrize("pad_id", [0, 3])
def test_token_count_skips_its_pad_id(pad_id):
    labels = np.array([[5, 3, 0], [3, 3, 7]])
    metric = TokenCount(pad_id=pad_id)
    metric.update_state(labels, None)
    assert float(to_numpy(metric.result())) == np.count_nonzero(labels != pad_id)


def test_an_epochs_count_is_its_own_after_validation():
    # Keras takes an epoch's logs after validation has reset and refilled
    # the metric: the training count must not turn into the validation's.
    x = np.ones((8, 3), "float32")
    labels = np.tile([[4, 5, 0]], (8, 1))  # 2 real tokens a row
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
    model.compile("sgd", "mse", metrics=[TokenCount()])
    history = model.fit(x, labels, batch_size=4, epochs=2, verbose=0,
                        validation_data=(x[:2], labels[:2]))
    assert history.history["tokens"] == [16.0, 16.0]
    assert history.history["val_tokens"] == [4.0, 4.0]
