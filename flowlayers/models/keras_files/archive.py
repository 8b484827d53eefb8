"""Keras 3's ``.keras`` file: a zip (members stored, as Keras writes them) of

    metadata.json       {"keras_version", "date_saved"}: the Keras version whose layout the file follows
    config.json         the model's config (``to_keras.py``) with its ``compile_config`` (``training_config.py``)
    model.weights.h5    the weights and optimizer state (``weights.py``)

written atomically (``atomic.py``) by process 0 once every process has read the values, and read without running
anything from it: JSON, and HDF5 numbers checked before any is assigned (``reading.py`` makes the model).
"""
import datetime
import io
import json
import warnings
import zipfile

from ... import engine, env
from ...errors import CheckpointError
from . import atomic, hdf5, to_keras, training_config, weights

CONFIG, METADATA, WEIGHTS = "config.json", "metadata.json", "model.weights.h5"
KERAS_VERSION = "3.15.1"        # the Keras whose saving layout these files follow
CONFIG_LIMIT = 64 << 20         # bytes of config.json, at most
EXPANSION_LIMIT = 100           # bytes unpacked per byte stored, at most, for a member over BOMB_FLOOR
BOMB_FLOOR = 1 << 28


def save(model, filepath, where):
    """``model`` as a ``.keras`` file; compile settings and optimizer state where Keras has words for them (else
    a warning names what was left out)."""
    hdf5.require(where)
    config = to_keras.model_config(model, where)
    compile_config, unsaved = training_config.compile_config(model)
    config.update(build_config={"input_shape": None}, compile_config=compile_config)
    layer_values, optimizer = weights.values(model, include_optimizer=compile_config is not None)
    if env.process_index() == 0:
        metadata = {"keras_version": KERAS_VERSION,
                    "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S")}
        with atomic.replacing(filepath, where) as tmp:
            buffer = io.BytesIO()
            with hdf5.h5py.File(buffer, "w") as f:
                weights.write(f, layer_values, optimizer)
            with open(tmp, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr(METADATA, json.dumps(metadata))
                zf.writestr(CONFIG, json.dumps(config))
                zf.writestr(WEIGHTS, buffer.getvalue())
    engine.barrier(f"{where} {filepath}")
    warn_unsaved(model, compile_config, unsaved, where)


def warn_unsaved(model, compile_config, unsaved, where):
    """A warning naming what a Keras file has no place for (it stays in flowlayers' checkpoint directory)."""
    if model.optimizer is not None and compile_config is None:
        unsaved = f"the compile settings and optimizer state were not saved: {unsaved}"
    elif unsaved is not None:
        unsaved = f"{unsaved} was not saved"
    if unsaved is not None:
        warnings.warn(f"{where}: {unsaved}; a path without .keras/.h5 (flowlayers' checkpoint directory) keeps "
                      f"everything", stacklevel=4)


def load_weights(model, filepath, where):
    """The weights (and optimizer state) of a ``.keras`` file into ``model``, as Keras' ``load_weights`` reads one."""
    model.require_built("load_weights")
    _, packed = members(filepath, where)
    with hdf5.reading(packed, where) as f:
        weights.read(f, model, where)


def members(filepath, where):
    """(config, bytes of model.weights.h5) of a ``.keras`` file, each member checked before it is read."""
    hdf5.require(where)
    if not zipfile.is_zipfile(filepath):
        raise CheckpointError(f"{where}: expected a .keras file (a zip archive Keras or flowlayers wrote), received "
                              f"a file that is not a zip archive")
    with zipfile.ZipFile(filepath) as zf:
        names = set(zf.namelist())
        if CONFIG not in names:
            raise CheckpointError(f"{where}: expected {CONFIG} in the archive, received members {sorted(names)[:5]}")
        if WEIGHTS not in names:
            other = "model.weights.npz (Keras' npz weights, which flowlayers does not read)" \
                if "model.weights.npz" in names else "no weights member"
            raise CheckpointError(f"{where}: expected {WEIGHTS} in the archive, received {other}")
        assets = sorted(n for n in names if n.startswith("assets/") and not n.endswith("/"))
        if assets:
            raise CheckpointError(f"{where}: the archive holds assets {assets[:3]} (layers with files, such as "
                                  f"StringLookup's vocabulary), which flowlayers' layers do not take; expected none")
        text = _read(zf, CONFIG, CONFIG_LIMIT, where)
        packed = _read(zf, WEIGHTS, None, where)
    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{where}: {CONFIG} expected JSON, received text JSON cannot read ({e})") from None
    return config, packed


def _read(zf, name, limit, where):
    info = zf.getinfo(name)
    if limit is not None and info.file_size > limit:
        raise CheckpointError(f"{where}: {name} holds {info.file_size:,} bytes; expected at most {limit:,}")
    if info.file_size > BOMB_FLOOR and info.file_size > EXPANSION_LIMIT * max(info.compress_size, 1):
        raise CheckpointError(f"{where}: {name} unpacks to {info.file_size:,} bytes from {info.compress_size:,}; "
                              f"refused before reading (a zip bomb?)")
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"{where}: {name} could not be read from the archive ({e}); the file is damaged") \
            from None
