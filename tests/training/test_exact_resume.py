"""Exact resume: a `train` run killed with SIGKILL while it writes a
checkpoint, then resumed, ends with the weights of the uninterrupted run,
on this test's backend, in subprocesses as a user runs them."""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.model_files import check_model_file, load_model_file
from keras_transformer.training import list_checkpoints

# Dropout on (its random state is saved in the checkpoints); a checkpoint
# every 2 of the 63 batches.
FLAGS = ["--preset", "tiny", "--vocabulary-size", "200", "--tokens-per-batch", "512",
         "--max-length", "32", "--epochs", "3", "--max-minutes", "0",
         "--warmup-steps", "20", "--dropout-rate", "0.1", "--checkpoint-every-steps", "2",
         "--eval-sentences", "5", "--alpha", "0.6", "--beam-size", "1"]


def _command(corpus, run_dir, *extra):
    return [sys.executable, "-m", "keras_transformer", "train", "--corpus", str(corpus),
            "--run-dir", str(run_dir), *FLAGS, *extra]


def _run(command):
    result = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr[-3000:]


def _kill_while_saving(command, checkpoint_dir, saves):
    """Starts `command` and kills it (SIGKILL) while it writes its
    `saves`-th checkpoint, seen as the temporary file of the write."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=os.environ)
    seen = set()
    try:
        while process.poll() is None:
            if os.path.isdir(checkpoint_dir):
                writing = {f for f in os.listdir(checkpoint_dir) if f.endswith(".tmp.keras")}
                seen |= writing
                if writing and len(seen) >= saves:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    return sorted(writing)[0]
            time.sleep(0.002)
    finally:
        if process.poll() is None:
            process.kill()
    pytest.fail(f"the run ended before its checkpoint write number {saves}")


def _weights(path):
    return load_model_file(path, compile=False).get_weights()


def test_a_run_killed_mid_checkpoint_resumes_to_the_same_weights(tmp_path):
    corpus = tmp_path / "numbers.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=800)))
    _run(_command(corpus, tmp_path / "whole"))

    interrupted = tmp_path / "interrupted"
    checkpoint_dir = interrupted / "checkpoints"
    # A random one of the first 20 writes (of 32), so the kill lands mid-epoch
    # or at an epoch's end, in the first or second epoch.
    saves = random.Random(os.environ.get("KERAS_BACKEND")).randint(1, 20)
    killed = _kill_while_saving(_command(corpus, interrupted), checkpoint_dir, saves)
    # The partial file is under its temporary name, and every checkpoint
    # `--resume` would read is whole.
    assert killed.endswith(".tmp.keras")
    left = list_checkpoints(checkpoint_dir)
    assert left and all(check_model_file(path) is None for _, path in left)
    _run(_command(corpus, interrupted, "--resume"))

    whole = list_checkpoints(tmp_path / "whole" / "checkpoints")
    resumed = list_checkpoints(checkpoint_dir)
    assert whole[-1][0] == resumed[-1][0] == 63  # 3 epochs of 21 batches
    assert not [f for f in os.listdir(checkpoint_dir) if f.endswith(".tmp.keras")]
    # The last checkpoints (raw weights), and the saved models (their
    # moving averages), agree to float tolerance.
    for a, b in [(whole[-1][1], resumed[-1][1]),
                 (tmp_path / "whole" / "model.keras", interrupted / "model.keras")]:
        for x, y in zip(_weights(a), _weights(b), strict=True):
            np.testing.assert_allclose(x, y, atol=1e-5)
