"""Reading `.keras` files with one clear error for a file that is not one.

Keras reports a truncated file as "File not found", and a file of another
package as a missing class deep in deserialization; these say which file
is wrong and how, before anything else happens.
"""

import json
import os
import zipfile

import keras

# Every `.keras` archive holds these (Keras's saving format).
REQUIRED_ENTRIES = ("config.json", "metadata.json")


def check_model_file(path):
    """Raises a `ValueError` naming `path` and what is wrong unless it is a
    complete `.keras` archive: a zip file whose every entry passes its
    checksum and which holds a model config. Cheap: nothing is built."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path} is not a .keras file: not a zip archive (truncated, or "
            "another format)"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ValueError(f"{path} is a damaged .keras file: {error}") from None
    if damaged is not None:
        raise ValueError(f"{path} is a damaged .keras file: {damaged} fails its checksum")
    missing = [name for name in REQUIRED_ENTRIES if name not in names]
    if missing:
        raise ValueError(
            f"{path} is a zip archive but not a .keras model: it has no "
            f"{', '.join(missing)}"
        )


def saved_config(path):
    """The serialized model in `path` (`class_name`, `config`, ...), read
    without building it, after `check_model_file`."""
    check_model_file(path)
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def load_model_file(path, compile=True):
    """`keras.saving.load_model(path)`, after `check_model_file`; a model
    that Keras cannot rebuild (a class of another package, a newer format)
    raises a `ValueError` naming the file and Keras's reason."""
    check_model_file(path)
    try:
        return keras.saving.load_model(path, compile=compile)
    except Exception as error:  # Keras raises many kinds for one cause
        reason = " ".join(str(error).split()).split(". ")[0]  # its first sentence
        raise ValueError(
            f"{path} could not be loaded as a keras_transformer model: {reason}"
        ) from error
