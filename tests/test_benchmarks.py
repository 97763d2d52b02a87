"""The benchmark code runs on a tiny configuration, one round; no test
asserts a time."""

import argparse
import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from benchmarks import bfloat16, decoding, timing, training
from benchmarks.pipeline import padding_baselines
from keras_transformer.models import PRESETS, Transformer
from keras_transformer.training.runs import resolve_jit_compile


def test_decoding_benchmark_runs_and_both_sides_agree():
    result = decoding.run(preset="tiny", num_layers=1, vocabulary_size=100, batch=2,
                          source_length=4, max_extra_length=4, rounds=1)
    assert result["same_output"]  # cached and uncached beam search: same tokens
    assert result["output_length"] == 8
    for key in ("cached_vs_uncached", "ours_vs_keras_hub", "ours_vs_keras_hub_bart"):
        c = result[key]
        assert c["a_s"] > 0 and c["b_s"] > 0
        assert c["ratio_min"] <= c["ratio_median"] <= c["ratio_max"]


def test_compare_waits_for_each_warm_up_before_timing(monkeypatch):
    # JAX returns before it computes: an unawaited warm-up of `b` ran inside
    # the first timing of `a` (a 0.90x minimum for a 14.5x ratio).
    events = []
    monkeypatch.setattr(timing.keras.ops, "convert_to_numpy",
                        lambda out: events.append(("wait", out)))

    def side(name):
        return lambda data: events.append(("call", name)) or name

    result = timing.compare(side("a"), side("b"), None, rounds=2)
    assert events[:4] == [("call", "a"), ("wait", "a"), ("call", "b"), ("wait", "b")]
    assert len(events) == 12 and len(result["a_times"]) == 2


def test_compare_takes_the_seconds_self_timed_sides_report():
    seconds = {"a": iter([9.0, 1.0, 2.0]), "b": iter([9.0, 3.0, 8.0])}
    result = timing.compare(lambda _: (next(seconds["a"]), 0.0),
                            lambda _: (next(seconds["b"]), 0.0), None, 2, self_timed=True)
    assert result["a_times"] == [1.0, 2.0] and result["b_times"] == [3.0, 8.0]
    assert (result["ratio_min"], result["ratio_max"]) == (3.0, 4.0)


def test_compare_credits_each_call_the_peaks_read_either_side_of_it():
    readings = iter([10.0, 20.0, 30.0, 40.0, 50.0])
    result = timing.compare(lambda _: (1.0, 0.0), lambda _: (2.0, 0.0), None, 2,
                            self_timed=True, peak=lambda: next(readings))
    # Read before a's first round, then after every call: a, b, a, b.
    assert result["a_peaks"] == [15.0, 35.0] and result["b_peaks"] == [25.0, 45.0]


def test_utilisation_of_each_round_against_its_own_peak():
    # 10 FLOPs a step, 2 steps a round: 20 FLOPs in 1 s at peak 40, in 2 s at peak 20.
    u = training.utilisation(10, 2, [1.0, 2.0, 4.0], [40.0, 20.0, 10.0])
    assert (u["min"], u["median"], u["max"]) == (0.5, 0.5, 0.5)
    u = training.utilisation(10, 2, [1.0, 1.0, 1.0], [40.0, 20.0, 100.0])
    assert (u["min"], u["median"], u["max"]) == (0.2, 0.5, 1.0)


# Without TensorFlow (not possible on its own backend) `fit_steps` feeds an iterator.
@pytest.mark.parametrize(
    "feed", ["tf.data"] + (["iterator"] if keras.backend.backend() != "tensorflow" else []))
def test_fit_steps_times_every_step_after_the_first_and_averages_the_loss(feed, monkeypatch):
    # A frozen linear model (learning rate 0): the mean squared error of
    # each batch is known, and `fit` reports their mean, fed by tf.data or,
    # where TensorFlow is not installed, by an iterator of the batches.
    if feed == "iterator":
        monkeypatch.setitem(sys.modules, "tensorflow", None)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    model.layers[0].set_weights([np.array([[1.0], [2.0]], "float32")])
    model.compile(keras.optimizers.SGD(0.0), "mse")
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(4, 2)).astype("float32"),
                rng.normal(size=(4, 1)).astype("float32")) for _ in range(3)]
    seconds, loss = timing.fit_steps(model, batches)
    expected = np.mean([np.mean((x @ [[1.0], [2.0]] - y) ** 2) for x, y in batches])
    assert loss == pytest.approx(expected, rel=1e-5) and seconds > 0
    assert timing.fit_steps(model, batches[:1])[0] == 0  # one step: nothing timed


@pytest.mark.parametrize("preset", ["tiny", "base", "big"])
def test_parameter_formula_matches_count_params(preset):
    config = PRESETS[preset]["config"]
    model = Transformer.from_preset(preset, vocabulary_size=1000)
    counts = training.parameter_counts(config["d_model"], config["d_ff"],
                                       config["num_layers"], 1000)
    assert sum(counts.values()) == model.count_params()


def test_flop_formula_on_a_known_case():
    # d_model 4, d_ff 8, 1 layer, V 10, batch 1, length 2, worked by hand:
    # encoder 4*(16+4) + (2*4*8+8+4) + 2*2*4 = 80 + 76 + 16 = 172 weights,
    # decoder 2*80 + 76 + 3*8 = 260, embedding 40;
    # 6 * (172*2 + (260+40)*2) = 5664; attention 3*4*4*1*1*3*2*2 = 576.
    assert training.parameter_counts(4, 8, 1, 10) == {"encoder": 172, "decoder": 260,
                                                       "embedding": 40}
    assert training.training_flops(d_model=4, d_ff=8, num_layers=1, vocabulary_size=10,
                                   batch=1, length=2) == 5664 + 576


def test_batches_are_shifted_and_padded():
    (source, decoder, labels), = training.make_batches(1, 8, 16, 100)
    assert source.shape == decoder.shape == labels.shape == (8, 16)
    for d, y in zip(decoder, labels):
        n = np.count_nonzero(y)
        assert 8 <= n <= 16 and d[0] == 1 and not y[n:].any() and not d[n:].any()
        np.testing.assert_array_equal(d[1:n], y[:n - 1])


def test_padding_baselines_by_hand():
    # Two pairs of lengths (2, 4) and (4, 4): 14 real tokens in 4 sides of 4.
    result = padding_baselines([(2, 4), (4, 4)], tokens_per_batch=8)
    assert result["fixed"] == pytest.approx(14 / 16)
    assert result["per_batch"] == pytest.approx(14 / 16)  # 2 rows a batch: one batch


def test_training_benchmark_runs_on_this_backend():
    result = training.run(dict(d_model=16, num_heads=2, d_ff=32, num_layers=1,
                               vocabulary_size=50, batch=2, length=6),
                          steps=1, rounds=1, bfloat16_steps=2)
    assert result["parameters"]["ours"] == sum(training.parameter_counts(16, 32, 1, 50).values())
    assert result["parameters"]["keras_hub"] > result["parameters"]["ours"]  # untied, learned positions
    m = result["mfu"]
    assert 0 < m["utilisation"]["min"] <= m["utilisation"]["median"] <= m["utilisation"]["max"] < 1
    assert result["tokens_per_s"]["ours"] > 0
    # One round a comparison, each against the peak read beside it;
    # keras-hub's utilisation from its own round.
    hub = result["ours_vs_keras_hub"]
    assert len(hub["a_peaks"]) == len(hub["b_peaks"]) == 1
    assert m["keras_hub_utilisation"]["median"] == pytest.approx(
        m["flops_per_step"] / hub["b_times"][0] / hub["b_peaks"][0])
    assert result["ours_vs_keras_hub_same_loss"]["b_s"] > 0
    assert result["ours_vs_ours_with_muon"]["b_s"] > 0
    assert np.isfinite(result["bfloat16"]["bfloat16_loss"])
    # Every comparison on Keras's default path: graph mode on a CPU-only TensorFlow.
    assert result["jit_compile"] == result["bfloat16"]["jit_compile"] == resolve_jit_compile("auto")
    # nn.Transformer adds a final LayerNorm (2 x d_model) to each stack.
    assert result["parameters"]["torch_native"] == result["parameters"]["ours"] + 4 * 16
    assert result["ours_vs_torch_native"]["b_s"] > 0


def test_keras_hub_side_trains_with_keras_sparse_cross_entropy():
    # As a keras-hub user writes it: padding ignored, no label smoothing.
    labels = np.array([[2, 0]])
    logits = np.log(np.array([[[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]], "float32"))
    loss = training.keras_hub_loss()(labels, logits)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loss), -np.log(0.5), rtol=1e-6)


def test_gpu_benchmark_counts_flops_tokens_and_utilisation(tmp_path):
    from benchmarks import gpu

    # Graph mode on TensorFlow, eager on JAX and PyTorch: the quickest path here.
    gpu.main(["--small", "--rounds", "1", "--jit-compile", "false",
              "--json", str(tmp_path / "gpu.json")])
    result = json.loads((tmp_path / "gpu.json").read_text())
    assert result["jit_compile"] is False
    config, steps = result["config"], gpu.SMALL["steps"]
    tokens = training.real_target_tokens(training.make_batches(  # the first is untimed
        steps + 1, config["batch"], config["length"], config["vocabulary_size"])[1:])
    weights = sum(training.parameter_counts(config["d_model"], config["d_ff"],
                                            config["num_layers"],
                                            config["vocabulary_size"]).values())
    for policy in gpu.POLICIES:
        r = result[policy]
        assert r["parameters"] == weights
        assert r["flops_per_step"] == training.training_flops(**config)
        assert r["achieved_flops"] == pytest.approx(r["flops_per_step"] / r["step_s"])
        assert r["utilisation"] == pytest.approx(r["achieved_flops"] / r["peak_flops"])
        assert r["tokens_per_s"] == pytest.approx(tokens / steps / r["step_s"])
        assert r["step_s_min"] <= r["step_s"] <= r["step_s_max"]
    # The same weights and batches in 16 bits: the same loss, to bfloat16's precision.
    assert result["mixed_bfloat16"]["loss"] == pytest.approx(result["float32"]["loss"],
                                                             rel=2e-2)
    # Every hypothesis of an untrained model runs to input + max_extra_length.
    assert result["beam_search"]["output_shape"] == [2, 1, 4 + 4]
    text = gpu.table(result)
    assert "| float32 |" in text and "| mixed_bfloat16 |" in text and "sentences/s" in text
    assert text.startswith(f"{result['backend']} ({training.step_path(result['backend'], False)})")


def test_language_model_benchmark_runs_on_this_backend():
    from benchmarks import language_models

    result = language_models.run(rounds=1, steps=1, batch=2, length=8, generate_batch=2,
                                 prompt_length=4, max_length=10, lm_preset="gpt_tiny",
                                 encoder_preset="bert_tiny", vocabulary_size=50, num_layers=1)
    ours, theirs = result["causal_lm_parameters"]
    assert theirs == ours + 2 * 64  # GPT-2's final LayerNorm; post-norm GPT has none
    ours, theirs = result["masked_lm_parameters"]
    assert ours == theirs  # BERT's layout, weight for weight
    assert result["jit_compile"] == resolve_jit_compile("auto")  # Keras's default path
    for key in ("causal_lm", "masked_lm", "generate"):
        c = result[key]
        assert c["a_s"] > 0 and c["b_s"] > 0
        assert c["ratio_min"] <= c["ratio_median"] <= c["ratio_max"]


def test_each_row_names_the_path_its_step_ran():
    path = training.step_path
    assert [path(backend, False) for backend in ("tensorflow", "jax", "torch")] == [
        "graph mode", "eager", "eager"]
    # jit_compile=True is XLA on TensorFlow and JAX, torch.compile on PyTorch.
    assert [path(backend, True) for backend in ("tensorflow", "jax", "torch")] == [
        "XLA", "XLA", "torch.compile"]


def test_both_benchmark_programs_parse_jit_compile_as_train_does(capsys):
    parser = argparse.ArgumentParser(prog="bench")
    training.add_jit_compile_argument(parser, "the path")
    assert parser.parse_args([]).jit_compile == "auto"
    assert parser.parse_args(["--jit-compile", "true"]).jit_compile is True
    assert parser.parse_args(["--jit-compile", "false"]).jit_compile is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--jit-compile", "xla"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--jit-compile" in error and "'xla'" in error and "auto" in error


@pytest.mark.once
def test_the_suite_prints_every_row_and_writes_the_readme(tmp_path):
    # Once, on PyTorch (the fastest to start): every suite, tiny sizes.
    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- benchmarks:torch -->\nold\n<!-- /benchmarks:torch -->\n"
                      "between\n<!-- benchmarks:torch:language_models -->\nold\n"
                      "<!-- /benchmarks:torch:language_models -->\nafter\n")
    env = dict(os.environ, KERAS_BACKEND="torch")
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--small", "--rounds", "1",
                           "--readme", str(readme)], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(__file__)), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    sides = [("ours", "keras-hub, Keras's sparse cross-entropy"),
             ("ours", "keras-hub, our loss and Adam"),
             ("ours", "torch nn.Transformer"), ("ours", "ours with Muon, train's default"),
             ("float32", "mixed_bfloat16"), ("cached", "uncached"),
             ("ours", "keras-hub BeamSampler, our model"),
             ("ours", "keras-hub BART \\+ BeamSampler"), ("tf.data", "in memory"),
             ("ours", "keras-hub GPT2CausalLM"), ("ours", "keras-hub BertMaskedLM"),
             ("ours", "keras-hub GPT2CausalLM.generate")]
    for a, b in sides:  # | what | A 0.123 s | B 0.456 s | 1.23x (1.10-1.30) |
        row = rf"\| {a} [\d.]+ s \| {b} [\d.]+ s \| [\d.]+x \([\d.]+-[\d.]+\) \|"
        assert re.search(row, text), (a, b)
    for note in ("tokens/s", "FLOPs utilisation", "keras-hub's", "compile time",
                 "ours with Muon against keras-hub",
                 "padding efficiency", "mixed_bfloat16 (eager)", "training (eager)"):
        assert note in text
    # Two tables: the translator's suites, then the language models'.
    written = readme.read_text()
    translator, _, language_models = written.partition("between\n")
    assert translator.startswith("before\n<!-- benchmarks:torch -->\n| torch |")
    assert translator.endswith("<!-- /benchmarks:torch -->\n")
    assert "GPT2CausalLM" not in translator and "BART" in translator
    assert language_models.startswith(
        "<!-- benchmarks:torch:language_models -->\n| torch |")
    assert language_models.endswith("<!-- /benchmarks:torch:language_models -->\nafter\n")
    assert "GPT2CausalLM" in language_models and "old" not in written
    tables = text.split("| torch | A |")[1:]
    assert len(tables) == 2 and all(f"| torch | A |{t.rstrip()}\n" in written for t in tables)


def test_baseline_is_causal_counted_and_decodes_its_own_argmax():
    from benchmarks import baseline

    sizes = dict(d_model=16, num_heads=2, d_ff=24, num_layers=1, dropout_rate=0.0)
    v, length, d, f = 40, 10, 16, 24
    keras.utils.set_random_seed(0)
    model = baseline.baseline_model(v, length, **sizes)
    # Embeddings (token + position, both sides), encoder layer (attention,
    # feed-forward, 2 LayerNorms), decoder layer (2 attentions, 3), output.
    attention, feed_forward, norm = 4 * (d * d + d), 2 * d * f + f + d, 2 * d
    assert model.count_params() == (2 * (v * d + length * d) + attention + feed_forward
                                    + 2 * norm + 2 * attention + feed_forward + 3 * norm
                                    + d * v + v)
    rng = np.random.default_rng(0)
    source = rng.integers(4, v, (2, length)).astype("int32")
    source[:, 6:] = 0
    decoder = rng.integers(4, v, (2, length)).astype("int32")
    before = keras.ops.convert_to_numpy(model({"encoder_token_ids": source,
                                               "decoder_token_ids": decoder}))
    changed = decoder.copy()
    changed[:, 5] = 7
    after = keras.ops.convert_to_numpy(model({"encoder_token_ids": source,
                                              "decoder_token_ids": changed}))
    np.testing.assert_allclose(after[:, :5], before[:, :5], atol=1e-5)  # no earlier logit moves
    assert np.abs(after[:, 5:] - before[:, 5:]).max() > 1e-4
    # Greedy output, fed back with teacher forcing, is its own argmax.
    out = baseline.GreedyTranslator(model, None, length=length).translate_ids(source)
    assert (out[:, 0] == 1).all()
    forced = np.argmax(keras.ops.convert_to_numpy(model(
        {"encoder_token_ids": source, "decoder_token_ids": out})), -1)
    np.testing.assert_array_equal(forced[:, :-1], out[:, 1:])


def test_baseline_trains_and_is_scored_by_the_demos_harness():
    from benchmarks import baseline

    result = baseline.run_baseline(
        corpus="numbers", minutes=0, max_steps=20, eval_sentences=16, vocabulary_size=300,
        batch_size=16, d_model=16, num_heads=2, d_ff=24, num_layers=1)
    assert result["steps"] == 20 and result["test_sentences"] == 16
    assert 0 <= result["bleu"] <= 100 and 0 <= result["chrf"] <= 100


def test_side_by_side_reads_the_peak_around_each_run(monkeypatch, capsys):
    from benchmarks import baseline

    events, readings = [], iter([1e11, 2e11, 4e11])

    def reader():
        def read():
            events.append("peak")
            return next(readings)
        return read

    def run(name, bleu):
        def fake(config=None, **kwargs):
            events.append(name)
            if config is not None:
                events.append(config.run_dir)
            return {"bleu": bleu, "chrf": 2 * bleu, "steps": 10, "training_minutes": 1.0,
                    "dropout_rate": 0.05}
        return fake

    monkeypatch.setattr(baseline, "matmul_peak_reader", reader)
    monkeypatch.setattr(baseline, "train", run("demo", 15.0))
    monkeypatch.setattr(baseline, "run_baseline", run("baseline", 10.0))
    result = baseline.main(["--demo", "--run-dir", "kept/demo"])
    assert events == ["peak", "demo", "kept/demo", "peak", "baseline", "peak"]
    assert result["demo"]["matmul_peak_flops"] == [1e11, 2e11]
    assert result["baseline"]["matmul_peak_flops"] == [2e11, 4e11]
    assert result["bleu_ratio"] == 1.5 and result["chrf_ratio"] == 1.5
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("demo:") and lines[0].endswith(
        "matmul peak 100-200 GFLOP/s, residual dropout 0.05")
    assert lines[1].endswith("matmul peak 200-400 GFLOP/s")
    assert lines[2] == "ratios: BLEU 1.50x, chrF 1.50x"


def test_baseline_refuses_a_run_dir_without_the_demo(capsys):
    from benchmarks import baseline

    with pytest.raises(SystemExit):
        baseline.main(["--run-dir", "kept/demo"])
    assert "--run-dir kept/demo: only with --demo" in capsys.readouterr().err


def test_bfloat16_benchmark_reads_flags_and_rounds_like_bfloat16(tmp_path):
    result = bfloat16.run(n=64, rounds=1)
    assert result["float32_s"] > 0 and result["bfloat16_s"] > 0
    # bfloat16 keeps 8 bits of mantissa: the product differs from float32's,
    # by about 2^-8 of its scale, not by more.
    assert 1e-4 < result["relative_difference"] < 0.05
    if keras.backend.backend() == "tensorflow":  # and in graph mode, oneDNN's
        assert 1e-4 < result["graph_mode"]["relative_difference"] < 0.05
    else:
        assert "graph_mode" not in result
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert bfloat16.cpu_flags(str(cpuinfo)) == {
        "avx512_bf16": True, "amx_bf16": False, "avx512f": True, "avx2": True}
    assert bfloat16.cpu_flags(str(tmp_path / "missing")) is None
