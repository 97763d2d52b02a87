"""`train`'s memory does not grow with a prepared corpus, as it does with a
raw one held in memory (`benchmarks/corpus_scale.py` measures 100K to 4.5M
pairs; docs/RESULTS.md)."""

import pytest

from benchmarks.corpus_scale import measure


@pytest.mark.once
def test_train_memory_stays_flat_on_a_prepared_corpus(tmp_path):
    # Measured (2026-11-25, TensorFlow): prepared 1,754 -> 1,847 MiB (+5%,
    # the shuffle window filling: 20K pairs fill a third of it); raw 1,773
    # -> 2,326 MiB (+31%).
    small, large = measure([20_000, 200_000], str(tmp_path), train_minutes=0.2,
                           raw=200_000, vocabulary_size=2000)
    for row in (small, large):
        assert row["train_prepared_steps"] > 0 and row["train_raw_steps"] > 0
    assert large["train_prepared_peak_mib"] <= 1.10 * small["train_prepared_peak_mib"]
    assert large["train_raw_peak_mib"] >= 1.15 * small["train_raw_peak_mib"]
