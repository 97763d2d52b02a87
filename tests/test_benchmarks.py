from benchmarks import decoding


def test_decoding_benchmark_runs_and_both_sides_agree():
    result = decoding.run(d_model=32, num_layers=1, vocabulary_size=100, batch=2,
                          source_length=4, max_extra_length=4, rounds=1)
    assert result["same_output"]  # cached and uncached beam search: same tokens
    assert result["output_length"] == 8
    assert result["cached_s"] > 0 and result["uncached_s"] > 0
    assert result["speedup_min"] <= result["speedup_median"] <= result["speedup_max"]
