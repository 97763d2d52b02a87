import numpy as np
import pytest

from keras_transformer import MaskedAccuracy
from tests.helpers import LABELS, LOGITS, to_numpy


def test_masked_accuracy_ignores_padding():
    metric = MaskedAccuracy()
    # argmax: [[0, 2, 3], [3, 0, 0]]; real labels [1, 2] and [3, 1]: 2 of 4
    metric.update_state(LABELS, LOGITS)
    assert float(to_numpy(metric.result())) == pytest.approx(0.5)
    metric.update_state(np.array([[2, 0, 0]]), LOGITS[:1])
    assert float(to_numpy(metric.result())) == pytest.approx(2 / 5)
    config = metric.get_config()
    assert MaskedAccuracy.from_config(config).get_config() == config


def test_masked_accuracy_sample_weight():
    metric = MaskedAccuracy()
    # Row 0 alone: argmax [0, 2] against labels [1, 2] -> 1 of 2.
    metric.update_state(LABELS, LOGITS, sample_weight=np.array([1.0, 0.0]))
    assert float(to_numpy(metric.result())) == pytest.approx(0.5)
    assert float(to_numpy(metric.count)) == pytest.approx(2.0)
