import numpy as np
import pytest

from keras_transformer.data import copy_reverse_task


def test_targets_are_reversed_sources_with_eos_and_shifted_decoder_inputs():
    inputs, targets = copy_reverse_task(50, seed=3, vocabulary_size=9)
    for enc, dec, tgt in zip(inputs["encoder_token_ids"], inputs["decoder_token_ids"], targets):
        source = enc[enc != 0]
        assert 3 <= len(source) <= 7 and source.min() >= 3 and source.max() <= 8
        np.testing.assert_array_equal(tgt[: len(source) + 1], list(source[::-1]) + [2])
        np.testing.assert_array_equal(dec[: len(source) + 1], [1] + list(source[::-1]))
        assert not tgt[len(source) + 1:].any() and not dec[len(source) + 1:].any()


def test_bad_arguments():
    with pytest.raises(ValueError, match="vocabulary_size=3"):
        copy_reverse_task(4, vocabulary_size=3)
    with pytest.raises(ValueError, match="min_length=5, max_length=2"):
        copy_reverse_task(4, min_length=5, max_length=2)
