import collections

import numpy as np
import pytest

from keras_transformer.data.classification import (
    classification_dataset,
    pack_pairs,
    translation_pairs,
)


def test_pairs_are_packed_with_segments():
    packed = pack_pairs([[5, 6, 7], [8]], [[9, 10], [11, 12, 13, 14, 15, 16]], max_length=8)
    np.testing.assert_array_equal(packed["token_ids"], [[1, 5, 6, 7, 2, 9, 10, 2],
                                                        [1, 8, 2, 11, 12, 13, 14, 2]])
    np.testing.assert_array_equal(packed["segment_ids"], [[0, 0, 0, 0, 0, 1, 1, 1],
                                                          [0, 0, 0, 1, 1, 1, 1, 1]])


@pytest.mark.parametrize("n", [2, 3, 50])
def test_translation_pairs_have_one_positive_and_one_true_negative(n):
    pairs = [(f"source {i}", f"target {i}") for i in range(n)]
    firsts, seconds, labels = translation_pairs(pairs, seed=7)
    assert labels == [1, 0] * n
    for i, (source, target) in enumerate(pairs):
        assert firsts[2 * i] == firsts[2 * i + 1] == source
        assert seconds[2 * i] == target
        assert seconds[2 * i + 1] != target  # never its own translation
    # The negatives use every target once: the classes have the same targets.
    assert sorted(seconds[1::2]) == sorted(t for _, t in pairs)
    assert translation_pairs(pairs, seed=7) == (firsts, seconds, labels)
    if n > 3:
        assert translation_pairs(pairs, seed=8)[1] != seconds


def test_translation_pairs_need_two_pairs():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        translation_pairs([("a", "b")])


def test_classification_batches_keep_every_row_and_pad_to_a_bucket():
    rng = np.random.default_rng(0)
    firsts = [rng.integers(5, 99, size=rng.integers(1, 40)).tolist() for _ in range(300)]
    seconds = [rng.integers(5, 99, size=rng.integers(1, 40)).tolist() for _ in range(300)]
    labels = rng.integers(0, 3, 300).tolist()
    packed = pack_pairs(firsts, seconds, max_length=70)
    expected = collections.Counter(
        (tuple(ids[ids > 0]), tuple(seg[ids > 0]), label)
        for ids, seg, label in zip(packed["token_ids"], packed["segment_ids"], labels))
    seen = collections.Counter()
    dataset = classification_dataset(packed, labels, batch_size=16, seed=1)
    for inputs, batch_labels in dataset:
        ids, segments = inputs["token_ids"].numpy(), inputs["segment_ids"].numpy()
        assert ids.shape == segments.shape and ids.shape[0] <= 16
        lengths = np.count_nonzero(ids, axis=1)
        assert ids.shape[1] == min(b for b in (16, 32, 64, 70) if b >= lengths.max())
        for row, segment, label in zip(ids, segments, batch_labels.numpy()):
            seen[(tuple(row[row > 0]), tuple(segment[row > 0]), int(label))] += 1
            assert not segment[row == 0].any()
    assert seen == expected
    # No autotuner: deleting an exhausted iterator waited for its wake-up.
    assert dataset.options().autotune.enabled is False


def test_classification_dataset_needs_a_label_per_row():
    packed = pack_pairs([[5], [6]], max_length=8)
    with pytest.raises(ValueError, match="2 rows"):
        classification_dataset(packed, [1])
