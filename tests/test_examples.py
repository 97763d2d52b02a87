"""The examples run: the notebooks top to bottom (nbclient) with small
settings, drawing their pictures, the own-data training script and the
copy-task script. Marked `once`: they pick their own backend (torch unless
KERAS_BACKEND is set)."""

import os
import subprocess
import sys
from ast import literal_eval

import nbformat
import pytest
from nbclient import NotebookClient

from keras_transformer.data.corpora import numbers_and_dates

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")

# notebook --> (the small settings that replace its "parameters" cell,
# the number of pictures it must draw)
NOTEBOOKS = {
    "quickstart.ipynb": ("TRAIN_STEPS = 30\nVOCABULARY_SIZE = 500\n"
                         "TOKENS_PER_BATCH = 1024\nTEST_SENTENCES = 2", 2),
    "paper_tour.ipynb": ('COPY_TASK_STEPS = 128\nTABLE3_ROWS = ["base", "A1", "E"]', 2),
    # 1,500 number and date pairs instead of the Bible, tiny presets, a few
    # seconds a program.
    "language_models.ipynb": (
        "from keras_transformer.data.corpora import numbers_and_dates\n"
        "with open('pairs.tsv', 'w') as f:\n"
        "    f.writelines(f'{en}\\t{fr}\\n' for en, fr in numbers_and_dates(size=1500))\n"
        "CORPUS = 'pairs.tsv'\nLM_PRESET, BERT_PRESET = 'gpt_tiny', 'bert_tiny'\n"
        "LM_MINUTES = PRETRAIN_MINUTES = FINETUNE_MINUTES = 0.05\n"
        "SETTINGS = dict(vocabulary_size=300, max_length=32, epochs=1)\nRUNS = 'runs'", 2),
}


@pytest.mark.once
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_and_draws(name, tmp_path):
    small_settings, pictures = NOTEBOOKS[name]
    notebook = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1, "each notebook has one cell tagged 'parameters'"
    parameters[0].source = small_settings
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert not errors
    assert len(images) >= pictures


def run_script(name, *args, stdin=None):
    """Runs `examples/<name>` in a fresh process; asserts it exits with 0."""
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        input=stdin, capture_output=True, text=True, timeout=600,
        env={**os.environ, "KERAS_BACKEND": os.environ.get("KERAS_BACKEND", "torch")},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.once
def test_own_data_script_trains_and_translates_stdin(tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{fr}\n" for en, fr in numbers_and_dates(size=300)))
    run_dir = tmp_path / "run"
    stdout = run_script("train_own_data.py", str(corpus), "--minutes", "0.1",
                        "--run-dir", str(run_dir), stdin="twelve\n")
    assert "BLEU" in stdout and "fr: " in stdout
    assert (run_dir / "model.keras").is_file() and (run_dir / "tokenizer.model").is_file()


@pytest.mark.once
def test_copy_task_script_learns_to_reverse():
    stdout = run_script("copy_task.py")
    # The last lines read "[source symbols] -> [decoded symbols]".
    decoded = [line.split(" -> ") for line in stdout.splitlines() if " -> " in line]
    assert len(decoded) == 5
    reversed_right = [literal_eval(out) == literal_eval(src)[::-1] for src, out in decoded]
    assert sum(reversed_right) >= 4, decoded
