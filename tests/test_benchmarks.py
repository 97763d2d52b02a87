from benchmarks import decoding


def test_decoding_benchmark_runs_and_both_sides_agree():
    result = decoding.run(d_model=32, num_layers=1, vocabulary_size=100, batch=2,
                          source_length=4, max_extra_length=4, rounds=1)
    assert result["same_output"]  # cached and uncached beam search: same tokens
    assert result["output_length"] == 8
    for key in ("cached_vs_uncached", "ours_vs_keras_hub"):
        c = result[key]
        assert c["a_s"] > 0 and c["b_s"] > 0
        assert c["ratio_min"] <= c["ratio_median"] <= c["ratio_max"]

