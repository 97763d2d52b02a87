"""`train`'s memory does not grow with a prepared corpus, as it does with a
raw one held in memory (`benchmarks/corpus_scale.py` measures 100K to 4.5M
pairs; docs/RESULTS.md)."""

import pytest

from benchmarks.corpus_scale import measure


@pytest.mark.once
def test_train_memory_stays_flat_on_a_prepared_corpus(tmp_path):
    # Both sizes fill the 65,536-pair shuffle window, so only the raw run
    # should grow. From 20K pairs (a third of the window) the prepared run
    # grew by 5-14% (2026-11-25, TensorFlow), the window filling: too close
    # to the limit on a slow machine, where 0.2 minutes is one step. The
    # raw run's growth is counted in MiB: it held the 120K more pairs in
    # 251 and 258 MiB more (2026-12-02), while its peak at 80K moved from
    # 1,503 to 1,678 MiB between two runs, enough to sink a ratio.
    small, large = measure([80_000, 200_000], str(tmp_path), train_minutes=0.2,
                           raw=200_000, vocabulary_size=2000)
    for row in (small, large):
        assert row["train_prepared_steps"] > 0 and row["train_raw_steps"] > 0
    assert large["train_prepared_peak_mib"] <= 1.10 * small["train_prepared_peak_mib"]
    assert large["train_raw_peak_mib"] - small["train_raw_peak_mib"] >= 150
