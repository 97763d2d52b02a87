"""The training program end to end on a small user corpus: checkpoints,
resume, averaging, the saved translator."""

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import sentencepiece

import keras_transformer as kt
from keras_transformer import cli
from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.tokenizer import detokenize
from keras_transformer.model_files import load_model_file
from keras_transformer.models import Transformer
from keras_transformer.training import TrainConfig, average_checkpoints, list_checkpoints, train
from keras_transformer.training import runs
from keras_transformer.training.train import (
    ALPHA_CANDIDATES,
    ALPHA_SENTENCES,
    build_model,
    evaluate_bleu,
    label_smoothing,
    load_splits,
)
from keras_transformer.translator import Translator
from tests.helpers import numpy_moving_averages


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """4 epochs on generated numbers and dates, then 4 more with --resume."""
    root = tmp_path_factory.mktemp("run")
    corpus = root / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=3000)))
    config = TrainConfig(
        corpus=str(corpus), run_dir=str(root / "run"), preset="tiny",
        vocabulary_size=300, tokens_per_batch=1024, max_length=32, epochs=4,
        max_minutes=0, warmup_steps=100, eval_sentences=100, average_last=2,
        beam_size=2, tokenized_bleu=True,
        # ~200 steps of 1,024 tokens: 2e-3 gave BLEU 60 here, 4e-3 (the
        # demo's peak then, for 2,500 steps of 2,048 tokens) 25 (measured).
        peak_learning_rate=2e-3,
    )
    first = train(config)
    config.epochs, config.resume = 8, True
    second = train(config)
    return config, first, second


def test_resume_continues_at_the_right_step(run):
    config, first, second = run
    assert second["steps"] == 2 * first["steps"] > 0
    with open(os.path.join(config.run_dir, "history.csv")) as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == [str(e) for e in range(8)]
    # Named by batches trained on; one at every epoch's end (keep_checkpoints=5).
    checkpoints = list_checkpoints(os.path.join(config.run_dir, "checkpoints"))
    batches_per_epoch = first["steps"] // 4
    assert [batches for batches, _ in checkpoints] == [
        epoch * batches_per_epoch for epoch in range(4, 9)]


def test_training_on_numbers_learns_to_translate(run):
    # Measured on torch: BLEU 63 / chrF 75 after 8 epochs (208 steps);
    # an untrained model scores BLEU 0.0 / chrF < 2 here.
    _, first, second = run
    assert second["bleu"] >= 30.0 and second["chrf"] >= 50.0
    assert second["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert second["tokenized_bleu"] > 0 and "compounds split" in second[
        "tokenized_bleu_method"]
    assert second["bleu"] > first["bleu"]


def test_xla_and_static_shapes_only_on_jax_by_default(run):
    # TensorFlow's graph mode takes every batch shape; XLA would compile one
    # program per length bucket (see `resolve_jit_compile`).
    _, first, second = run
    on_jax = keras.backend.backend() == "jax"
    for results in (first, second):
        assert results["jit_compile"] is on_jax
        assert results["static_shapes"] is on_jax


@pytest.mark.parametrize("name, setting", [
    ("jit_compile", "true"), ("jit_compile", 1), ("jit_compile", None),
    ("alpha", "best"), ("alpha", -0.5), ("alpha", True),
    ("ema_momentum", 1.0), ("ema_momentum", -0.1), ("ema_momentum", "0.99"),
    ("gradient_accumulation_steps", 0), ("weight_decay", -0.1), ("clip_norm", -1.0),
    ("optimizer", "sgd"),
])
def test_bad_settings_fail_before_any_work(name, setting, tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=re.escape(f"{name}={setting!r}")):
        train(TrainConfig(corpus="numbers", run_dir=str(run_dir), **{name: setting}))
    assert not run_dir.exists()


@pytest.mark.parametrize("momentum", [0.5, 0.0])
def test_training_ends_with_the_moving_average_of_the_weights(momentum):
    # One step an epoch, so every step's weights can be read (on JAX they
    # are only synced back to the variables between epochs).
    config = TrainConfig(preset="tiny", ema_momentum=momentum, warmup_steps=2,
                         peak_learning_rate=1e-2)
    model = build_model(config, vocabulary_size=50, jit_compile=False)
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (4, 7)),
              "decoder_token_ids": rng.integers(1, 50, (4, 6))}
    labels = rng.integers(1, 50, (4, 6))
    steps = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: steps.append(model.get_weights()))
    model.fit(inputs, labels, batch_size=4, epochs=4, callbacks=[record], verbose=0)
    expected = numpy_moving_averages(steps, momentum)[-1]
    assert not np.allclose(steps[-1][0], steps[-2][0])  # the weights did move
    for final, average in zip(model.get_weights(), expected):
        np.testing.assert_allclose(final, average, rtol=1e-5, atol=1e-6)


def test_alpha_is_chosen_on_the_validation_split_and_saved(run):
    config, _, second = run
    table = {float(alpha): bleu for alpha, bleu in second["alpha_validation_bleu"].items()}
    assert list(table) == list(ALPHA_CANDIDATES)
    assert second["alpha"] == max(table, key=table.get)
    translator = Translator.load(config.run_dir)  # translator.json's alpha
    assert translator.alpha == second["alpha"]
    # The table holds the BLEU of each alpha's translations.
    _, valid, _ = load_splits(config)
    for alpha in (second["alpha"], ALPHA_CANDIDATES[0]):
        translator.alpha = alpha
        bleu = evaluate_bleu(translator, valid[:ALPHA_SENTENCES])["bleu"]
        assert bleu == pytest.approx(table[alpha], rel=1e-6)
    assert Translator.load(config.run_dir, alpha=0.0).alpha == 0.0  # an argument wins


def test_average_is_the_mean_of_the_checkpoints(run):
    config, _, _ = run
    paths = [p for _, p in list_checkpoints(os.path.join(config.run_dir, "checkpoints"))][-2:]
    averaged = average_checkpoints(paths)
    a, b = (keras.saving.load_model(p, compile=False).get_weights() for p in paths)
    for got, x, y in zip(averaged.get_weights(), a, b):
        np.testing.assert_allclose(got, (x + y) / 2, atol=1e-6)
    assert not np.allclose(a[0], b[0])  # the two checkpoints really differ


def test_saved_translator_handles_bad_input(run):
    config, _, _ = run
    translator = Translator.load(config.run_dir, beam_size=2, max_extra_length=5,
                                 max_source_length=8)
    sentences = ["", "   ", "twelve", "☃ ☃ ☃", "one two three four five six seven eight nine"]
    with pytest.warns(UserWarning, match="max_source_length=8"):
        out = translator.translate(sentences)
    assert len(out) == 5 and out[0] == out[1] == ""
    assert all(isinstance(s, str) for s in out)
    assert translator.translate(["twelve"]) == [out[2]]  # batching changes nothing
    with pytest.raises(TypeError, match="list of strings"):
        translator.translate("twelve")


def test_translator_refuses_a_tokenizer_with_other_special_ids(run):
    config, _, _ = run
    translator = Translator.load(config.run_dir)
    model = Transformer.from_config({**translator.model.get_config(), "bos_id": 3})
    with pytest.raises(ValueError, match="bos_id=3 is '<unk>' in the tokenizer, not '<s>'"):
        Translator(model, translator.tokenizer)


def test_translate_ids_is_the_path_of_translate(run):
    config, _, _ = run
    translator = Translator.load(config.run_dir, beam_size=2)
    sentences = ["twelve", "four hundred and six"]
    ids = translator.encode(sentences)
    assert all(row[-1] == translator.model.eos_id for row in ids)
    tokens, scores = translator.translate_ids(translator._pad(ids))
    assert tokens.shape[0] == scores.shape[0] == 2
    outputs = [translator.until_eos(row) for row in tokens]
    # One batched detokenization gives what SentencePiece gives row by row,
    # and translate's strings.
    pieces = sentencepiece.SentencePieceProcessor(model_proto=translator.tokenizer.proto)
    expected = [pieces.decode(row) for row in outputs]
    assert detokenize(translator.tokenizer, outputs) == expected
    assert translator.translate(sentences) == expected


SENTENCES = ["twelve", "", "March 3, 1999", "four hundred and six", "☃"]


def test_translate_command_reads_a_file_and_stdin(run, tmp_path, monkeypatch, capsys):
    config, _, _ = run
    expected = Translator.load(config.run_dir).translate(SENTENCES)
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    # The installed entry point, in its own process, on a file.
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer", "translate", config.run_dir,
         "--input", str(path), "--batch-size", "2"],
        capture_output=True, text=True, check=True,
    )
    assert result.stdout.split("\n") == expected + [""]
    # The same command in this process, on stdin.
    stdin = ("\n".join(SENTENCES) + "\n").encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    assert cli.main(["translate", config.run_dir]) == 0
    assert capsys.readouterr().out.split("\n") == expected + [""]


# Loads the SavedModel with keras_transformer made unimportable.
SERVE = """
import json, sys
sys.modules["keras_transformer"] = None
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece ops
translator = tf.saved_model.load(sys.argv[1])
out = translator.translate(tf.constant(json.loads(sys.argv[2])))
print(json.dumps([s.decode("utf-8") for s in out.numpy()]))
"""


def test_saved_model_translates_without_the_package(run, tmp_path):
    config, _, _ = run
    translator = Translator.load(config.run_dir, max_source_length=8)
    if keras.backend.backend() != "tensorflow":
        with pytest.raises(RuntimeError, match="TensorFlow backend"):
            translator.export_saved_model(str(tmp_path / "exported"))
        return
    translator.export_saved_model(str(tmp_path / "exported"))
    sentences = SENTENCES + ["one two three four five six seven eight nine"]
    with pytest.warns(UserWarning, match="max_source_length=8"):
        expected = translator.translate(sentences)
    result = subprocess.run(
        [sys.executable, "-c", SERVE, str(tmp_path / "exported"), json.dumps(sentences)],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(result.stdout) == expected


def test_train_command_takes_auto_or_a_number_for_alpha(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", "--alpha", "best"])
    assert stopped.value.code == 2
    assert "expected auto or a number; got 'best'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--jit-compile", "maybe"], "--jit-compile: expected auto or true or false; got 'maybe'"),
    (["--long-pairs", "cut"], "--long-pairs: expected drop or truncate; got 'cut'"),
    (["--dropout-rate", "high"], "--dropout-rate: expected auto or a number; got 'high'"),
    (["--epochs", "2.5"], "--epochs: expected an integer; got '2.5'"),
])
def test_train_flags_are_parsed_by_their_types(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", *argv])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_train_flags_give_typed_values(monkeypatch):
    seen = {}
    program = sys.modules["keras_transformer.training.train"]  # the module, not the function
    monkeypatch.setattr(program, "train", lambda config: seen.setdefault("config", config))
    cli.main(["train", "--jit-compile", "False", "--alpha", "0.8", "--dropout-rate", "0.2",
              "--target-path", "t.de", "--resume"])
    config = seen["config"]
    assert config.jit_compile is False and config.alpha == 0.8 and config.resume is True
    assert config.dropout_rate == 0.2 and config.target_path == "t.de"
    assert config.long_pairs == "drop" and config.epochs == TrainConfig.epochs


def test_a_recipe_gives_the_papers_settings_and_the_flags_given_win(monkeypatch, capsys):
    seen = {}
    program = sys.modules["keras_transformer.training.train"]
    monkeypatch.setattr(program, "train", lambda config: seen.setdefault("config", config))
    cli.main(["train", "--recipe", "paper-big", "--corpus", "data/wmt14",
              "--tokens-per-batch", "3125", "--gradient-accumulation-steps", "8"])
    config = seen["config"]
    assert (config.corpus, config.tokens_per_batch, config.gradient_accumulation_steps) == (
        "data/wmt14", 3125, 8)  # the flags given
    # Sections 5.1-6.1: big model, 300K updates, warmup 4000 with the formula's
    # own peak, the last 20 checkpoints every 10 minutes, beam 4, alpha 0.6,
    # tokenized BLEU, English to German.
    assert (config.preset, config.max_updates, config.warmup_steps) == ("big", 300_000, 4000)
    assert (config.peak_learning_rate, config.max_minutes, config.ema_momentum) == (0, 0, 0)
    assert config.weight_decay == config.clip_norm == 0
    assert config.learning_rate_decay == "paper"  # equation 3 all the way
    assert (config.average_last, config.checkpoint_every_minutes) == (20, 10.0)
    assert config.keep_checkpoints >= config.average_last
    assert (config.beam_size, config.alpha, config.tokenized_bleu) == (4, 0.6, True)
    assert (config.source_language, config.target_language) == ("en", "de")
    assert config.subword_model == "bpe"  # section 5.1's EN-DE vocabulary
    base = program.RECIPES["paper-base"]
    assert base["tokens_per_batch"] * base["gradient_accumulation_steps"] == 25_000
    assert (base["preset"], base["max_updates"], base["average_last"]) == ("base", 100_000, 5)
    # Without a recipe, the fields' defaults.
    seen.clear()
    cli.main(["train", "--preset", "tiny"])
    assert seen["config"] == TrainConfig(preset="tiny")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", "--recipe", "paper-huge"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and len(error.splitlines()) == 1
    assert "'paper-huge'" in error and "paper-base" in error


@pytest.mark.parametrize("accelerator", [False, True])
def test_auto_compiles_with_xla_on_jax_and_on_tensorflow_with_an_accelerator(
        accelerator, monkeypatch):
    monkeypatch.setattr(runs, "has_accelerator", lambda: accelerator)
    backend = keras.backend.backend()
    expected = backend == "jax" or (backend == "tensorflow" and accelerator)
    assert runs.resolve_jit_compile("auto") is expected
    assert runs.resolve_jit_compile(False) is False


@pytest.mark.parametrize("accelerator", [False, True])
def test_tf32_is_allowed_only_on_pytorch_with_a_gpu(accelerator, monkeypatch):
    monkeypatch.setattr(runs, "has_accelerator", lambda: accelerator)
    expected = keras.backend.backend() == "torch" and accelerator
    if keras.backend.backend() == "torch":
        import torch

        # Properties of PyTorch's backends, which monkeypatch cannot undo.
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            assert runs.allow_tf32() is expected
            assert torch.backends.cuda.matmul.allow_tf32 is expected
            assert torch.backends.cudnn.allow_tf32 is expected
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    else:
        assert runs.allow_tf32() is False


def test_max_updates_stops_a_run_and_a_resumed_run_goes_on_to_a_new_one(tmp_path, capsys):
    corpus = tmp_path / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=600)))
    config = TrainConfig(
        corpus=str(corpus), run_dir=str(tmp_path / "run"), preset="tiny",
        vocabulary_size=200, tokens_per_batch=256, max_length=32, max_minutes=0,
        max_updates=3, gradient_accumulation_steps=2, ema_momentum=0, eval_sentences=5,
        beam_size=1, alpha=0.6, quiet=True, warmup_steps=1)
    checkpoints = os.path.join(config.run_dir, "checkpoints")
    assert train(config)["steps"] == 3  # updates, of 2 batches each
    assert [batches for batches, _ in list_checkpoints(checkpoints)] == [6]
    assert train(dataclasses.replace(config, max_updates=5, resume=True))["steps"] == 5
    assert [batches for batches, _ in list_checkpoints(checkpoints)] == [6, 10]
    # The rate fell linearly to zero over the budget of batches: the last
    # batch of each run began with 5 of 6 and 9 of 10 batches spent.
    rates = [float(load_model_file(path).optimizer.learning_rate)
             for _, path in list_checkpoints(checkpoints)]
    peak = config.peak_learning_rate  # the demo's default
    np.testing.assert_allclose(rates, [peak * (1 - 0.833), peak * (1 - 0.9)], rtol=1e-5)
    output = capsys.readouterr()
    assert "steps/s" not in output.err and "Epoch 1/" not in output.out  # quiet


@pytest.mark.parametrize("preset, flag, expected", [
    ("D3", None, 0.0), ("D4", None, 0.2), ("base", None, 0.1), ("mini", None, 0.1),
    ("D4", 0.05, 0.05), ("D3", 0.1, 0.1),  # the flag wins
])
def test_label_smoothing_is_the_presets_unless_given(preset, flag, expected):
    assert label_smoothing(TrainConfig(preset=preset, label_smoothing=flag)) == expected


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_and_accumulation_reach_the_model(policy):
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (4, 7)),
              "decoder_token_ids": rng.integers(1, 50, (4, 6))}
    labels = rng.integers(1, 50, (4, 6))
    losses = {}
    for dtype_policy in ("float32", policy):
        keras.utils.set_random_seed(0)
        config = TrainConfig(preset="tiny", dtype_policy=dtype_policy,
                             gradient_accumulation_steps=2, dropout_rate=0.0)
        model = build_model(config, vocabulary_size=50, jit_compile=False)
        losses[dtype_policy] = [model.train_on_batch(inputs, labels, return_dict=True)["loss"]
                                for _ in range(4)]
    assert model.encoder_blocks[0].compute_dtype == policy.removeprefix("mixed_")
    assert {w.dtype for w in model.weights} == {"float32"}  # the weights stay float32
    # Keras adds loss scaling for float16 only.
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (policy == "mixed_float16")
    optimizer = model.optimizer.inner_optimizer if scaled else model.optimizer
    assert optimizer.gradient_accumulation_steps == 2
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == 2  # 4 batches, 2 updates
    # The same model in 16 bits: the same losses, to 16-bit precision.
    np.testing.assert_allclose(losses[policy], losses["float32"], rtol=2e-2)
    assert losses[policy][-1] < losses[policy][0]


def test_the_batch_and_the_peak_rate_default_to_the_optimizers_own():
    muon, adam = TrainConfig(), TrainConfig(optimizer="adam")  # Muon is the default
    assert (muon.tokens_per_batch, muon.peak_learning_rate) == (1024, 6e-3)
    assert (adam.tokens_per_batch, adam.peak_learning_rate) == (512, 4e-3)
    given = TrainConfig(optimizer="adam", tokens_per_batch=2048, peak_learning_rate=0.0)
    assert (given.tokens_per_batch, given.peak_learning_rate) == (2048, 0.0)


@pytest.mark.parametrize("name", ["adam", "muon"])
def test_the_optimizer_setting_picks_the_optimizer_with_the_runs_settings(name):
    config = TrainConfig(preset="tiny", optimizer=name, weight_decay=0.2, clip_norm=0.5)
    optimizer = build_model(config, vocabulary_size=50, jit_compile=False).optimizer
    assert type(optimizer) is {"adam": kt.optimizers.Adam, "muon": kt.optimizers.Muon}[name]
    assert (optimizer.weight_decay, optimizer.global_clipnorm) == (0.2, 0.5)
    # The decaying rate starts at the peak; `BudgetDecay` sets it every batch.
    assert float(keras.ops.convert_to_numpy(optimizer.learning_rate)) == pytest.approx(
        config.peak_learning_rate)
    if name == "muon":
        assert optimizer.adam_weight_decay == 0.2


def test_table3_row_d4_trains_with_its_label_smoothing():
    model = build_model(TrainConfig(preset="D4"), vocabulary_size=64, jit_compile=False)
    assert model.loss.epsilon == 0.2


@pytest.mark.parametrize("optimizer", ["adam", "muon"])
def test_weight_decay_takes_rate_times_decay_of_every_weight_off_it(optimizer):
    # AdamW's decoupled decay, in both parts of Muon too: with the same
    # gradient and moments, the decayed update lands `rate x weight_decay
    # x w` below the plain one.
    rng = np.random.default_rng(0)
    inputs = {"encoder_token_ids": rng.integers(1, 50, (4, 7)),
              "decoder_token_ids": rng.integers(1, 50, (4, 6))}
    labels = rng.integers(1, 50, (4, 6))
    weights = {}
    for decay in (0.0, 0.1):
        keras.utils.set_random_seed(0)
        config = TrainConfig(preset="tiny", optimizer=optimizer, weight_decay=decay,
                             ema_momentum=0)
        model = build_model(config, vocabulary_size=50, jit_compile=False)
        start = model.get_weights()
        model.train_on_batch(inputs, labels)
        weights[decay] = model.get_weights()
    rate = config.peak_learning_rate  # the decaying rate's first value
    assert TrainConfig.weight_decay == 0.1  # the default
    for w0, plain, decayed in zip(start, weights[0.0], weights[0.1]):
        np.testing.assert_allclose(decayed, plain - rate * 0.1 * w0, rtol=1e-5, atol=1e-8)
    assert not np.allclose(weights[0.1][0], weights[0.0][0], atol=1e-7)


@pytest.mark.parametrize("optimizer", ["adam", "muon"])
def test_clip_norm_scales_the_whole_gradient_down_to_the_global_norm(optimizer):
    # Adam's and Muon's first updates do not depend on the gradient's
    # scale, their second do: a clipped run given a first gradient over the
    # norm and a second under it must match an unclipped run given the
    # first scaled to the norm by hand and the second as it is.
    assert TrainConfig.clip_norm == 1.0  # the default
    rng = np.random.default_rng(0)

    def build(clip):
        return build_model(TrainConfig(preset="tiny", optimizer=optimizer, clip_norm=clip,
                                       ema_momentum=0), vocabulary_size=50, jit_compile=False)

    model = build(0.0)
    start = model.get_weights()
    first, second = ([rng.normal(size=v.shape).astype("float32")
                      for v in model.trainable_variables] for _ in range(2))

    def global_norm(grads):
        return float(np.sqrt(sum(np.sum(g.astype("float64") ** 2) for g in grads)))

    first_norm = global_norm(first)
    second = [g * (0.25 / global_norm(second)) for g in second]
    assert first_norm > 0.5

    def two_updates(clip, gradients):  # a fresh model and optimizer from `start`
        model = build(clip)
        model.set_weights(start)
        for grads in gradients:
            model.optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads],
                                  model.trainable_variables)
        return [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]

    clipped = two_updates(0.5, [first, second])
    by_hand = two_updates(0.0, [[g * (0.5 / first_norm) for g in first], second])
    for a, b in zip(clipped, by_hand):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    unclipped = two_updates(0.0, [first, second])
    assert max(np.abs(a - b).max() for a, b in zip(clipped, unclipped)) > 1e-5


def test_resume_refuses_other_settings_or_a_missing_tokenizer(run, tmp_path):
    config, _, _ = run
    copy = tmp_path / "run"
    shutil.copytree(config.run_dir, copy)
    before = sorted(p.name for p in copy.rglob("*"))
    other = {"adam": "muon", "muon": "adam"}[config.optimizer]
    changed = dataclasses.replace(config, run_dir=str(copy), preset="mini", vocabulary_size=400,
                                  subword_model="unigram", optimizer=other)
    with pytest.raises(ValueError, match=r"--preset 'mini' \(the run's: 'tiny'\); "
                                         r"--vocabulary-size 400 \(the run's: 300\); "
                                         r"--subword-model 'unigram' \(the run's: 'bpe'\); "
                                         rf"--optimizer '{other}' \(the run's: "
                                         rf"'{config.optimizer}'\)"):
        train(changed)
    os.remove(copy / "tokenizer.model")
    with pytest.raises(ValueError, match="tokenizer.model is missing"):
        train(dataclasses.replace(config, run_dir=str(copy)))
    assert sorted(p.name for p in copy.rglob("*")) == [n for n in before if n != "tokenizer.model"]
