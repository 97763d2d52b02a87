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
