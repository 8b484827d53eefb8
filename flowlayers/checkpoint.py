"""Checkpoints: logical (unsharded) arrays keyed by variable path, a manifest with checksums,
written atomically (a crash mid-save leaves the previous checkpoint whole).

One format serves ``model.save_weights`` and ``flow.train.CheckPoint``::

    <dir>/00000.npy ...        one logical array per variable (weights and optimizer slots)
    <dir>/manifest.json        {"format", "variables": {key: {file, shape, dtype, sha256}}, "state": {...}}

``state`` holds what resuming needs besides arrays: ``optimizers`` (owner ->
class, slot names, step counter), ``rng`` (the seed; dropout is stateless in
seed, op and step, so seed + step is the whole random state) and, when saved
from inside ``fit``, ``position`` (epoch, batches done in it, running metric sums).

One variable is gathered (on save) or loaded (on restore) at a time, so host
memory is bounded by the largest variable.  Restoring checks every name,
shape, dtype and checksum before it writes anything, so a bad checkpoint
leaves the model as it was.
"""
import glob
import hashlib
import json
import os
import shutil
import tempfile

import warnings

import numpy as np

from . import config
from .errors import CheckpointError, describe_shape

MANIFEST = "manifest.json"
FORMAT = "flowlayers-checkpoint-2"


def save(directory, variables, state=None):
    """Write ``variables`` (key -> Variable) and the JSON-able ``state`` into ``directory``, atomically."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    for path in (directory, directory + ".old"):
        _check_replaceable(path)
    os.makedirs(parent, exist_ok=True)
    for stale in _tmp_dirs(parent, name):   # left by a killed save
        shutil.rmtree(stale, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=tmp_prefix(name), dir=parent)
    try:
        entries = {}
        for i, (key, var) in enumerate(variables.items()):
            value = var.numpy()
            fname = f"{i:05d}.npy"
            with open(os.path.join(tmp, fname), "wb") as f:
                np.save(f, value, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            entries[key] = {"file": fname, "shape": list(value.shape), "dtype": str(value.dtype),
                            "sha256": _sha256(os.path.join(tmp, fname))}
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump({"format": FORMAT, "variables": entries, "state": state or {}}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        # the swap: between the two renames only <dir>.old exists, and Reader falls back to it
        old = directory + ".old"
        if os.path.exists(directory):
            shutil.rmtree(old, ignore_errors=True)
            os.rename(directory, old)
        os.rename(tmp, directory)
        _fsync_dir(parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_replaceable(path):
    """A save replaces ``path`` only if it is a checkpoint, an empty directory or nothing: never the user's files."""
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        raise CheckpointError(f"checkpoint {path!r}: expected a directory to write the checkpoint into, received an "
                              f"existing file; choose another path")
    held = sorted(os.listdir(path))
    if held and MANIFEST not in held:
        raise CheckpointError(f"checkpoint {path!r}: expected a new path, an empty directory or an earlier "
                              f"checkpoint to replace, received a directory holding other files "
                              f"{held[:5]}{' ...' if len(held) > 5 else ''}; choose another path (a save replaces "
                              f"the whole directory)")


def tmp_prefix(name):
    """Where a save of checkpoint ``name`` writes before its swap: ``.<name>.tmp-XXXX`` beside it."""
    return f".{name}.tmp-"


def _tmp_dirs(parent, name):
    return glob.glob(os.path.join(glob.escape(parent), glob.escape(tmp_prefix(name)) + "*"))


def remove(directory):
    """Delete a checkpoint with what a killed save may have left beside it."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    for path in [directory, directory + ".old"] + _tmp_dirs(parent, name):
        shutil.rmtree(path, ignore_errors=True)


def exists(directory):
    directory = os.fspath(directory)
    return any(os.path.exists(os.path.join(d, MANIFEST)) for d in (directory, directory + ".old"))


class Reader:
    """One checkpoint on disk: its manifest read and checked, its arrays verified before any is written."""

    def __init__(self, directory):
        directory = os.fspath(directory)
        if not os.path.exists(os.path.join(directory, MANIFEST)) and os.path.exists(directory + ".old"):
            directory += ".old"     # a save was killed between its two renames
        self.directory = directory
        path = os.path.join(directory, MANIFEST)
        try:
            with open(path) as f:
                manifest = json.load(f)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {directory!r}: expected a directory with {MANIFEST}, received none "
                                  f"(no checkpoint saved there)") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} is not valid JSON ({e})") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("variables"), dict):
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} expected a manifest with "
                                  f"'variables', received {type(manifest).__name__}")
        self.entries = manifest["variables"]
        self.state = manifest.get("state", {})

    def verify(self, variables):
        """Every key present with the variable's shape and dtype kind, every file whole; reads no array."""
        missing = [k for k in variables if k not in self.entries]
        if missing:
            held = sorted(self.entries)
            raise CheckpointError(f"checkpoint {self.directory!r}: expected variables {missing[:5]}"
                                  f"{' ...' if len(missing) > 5 else ''}, received a checkpoint without them "
                                  f"(it holds {held[:5]}{' ...' if len(held) > 5 else ''})")
        for key, var in variables.items():
            entry = self.entries[key]
            if tuple(entry["shape"]) != var.shape:
                raise CheckpointError(f"checkpoint {self.directory!r}: variable {key!r} expected shape "
                                      f"{describe_shape(var.shape)}, received {describe_shape(tuple(entry['shape']))} "
                                      f"(a checkpoint of another architecture)")
            if (np.dtype(entry["dtype"]).kind == "f") != var.dtype.is_floating:
                raise CheckpointError(f"checkpoint {self.directory!r}: variable {key!r} expected dtype "
                                      f"{var.dtype.name}, received {entry['dtype']}")
        for key in variables:
            fname = os.path.join(self.directory, self.entries[key]["file"])
            if not os.path.exists(fname) or _sha256(fname) != self.entries[key]["sha256"]:
                raise CheckpointError(f"checkpoint {self.directory!r} is damaged: file {fname} (variable {key!r}) "
                                      f"is missing or fails its checksum")

    def array(self, key):
        return np.load(os.path.join(self.directory, self.entries[key]["file"]), allow_pickle=False)

    def restore(self, variables):
        """Verify all of ``variables`` (key -> Variable), then assign them one at a time."""
        self.verify(variables)
        for key, var in variables.items():
            var.assign(self.array(key))


# Training state ----------------------------------------------------------
# ``optimizers`` maps an owner (a model's optimizer name, or job name/optimizer name) to
# (optimizer, the variables it trains); a slot's key is "<owner>/<variable path>/<slot name>".

def state(optimizers, position=None):
    """The manifest's state: each optimizer's kind and step counter, the random state, fit's position."""
    out = {"optimizers": {owner: _optimizer_state(opt) for owner, (opt, _) in optimizers.items()},
           "rng": {"seed": config.seed()}}
    if position is not None:
        out["position"] = position
    return out


def slot_variables(optimizers):
    """Checkpoint key -> slot Variable, for every optimizer (slots not made yet are made, as zeros)."""
    return {f"{owner}/{var.path}/{name}": slot for owner, (opt, variables) in optimizers.items()
            for var in variables if var.trainable for name, slot in zip(opt.slot_names, opt.slots(var))}


def restore(directory, variables, optimizers):
    """Restore ``variables`` (key -> Variable) and the state of each optimizer saved by one of the same kind.

    Everything is verified before anything is written; returns the Reader (its ``state`` has the position).
    """
    reader = Reader(directory)
    plan, steps = dict(variables), []
    for owner, (opt, trainable) in optimizers.items():
        saved = _matching(reader.state.get("optimizers", {}), reader.directory, owner, opt)
        if saved is not None:
            plan.update(slot_variables({owner: (opt, trainable)}))
            steps.append((opt, saved["iterations"]))
    reader.restore(plan)
    for opt, step in steps:
        opt.iterations = step
    return reader


def _optimizer_state(optimizer):
    return {"class": type(optimizer).__name__, "slot_names": list(optimizer.slot_names),
            "iterations": int(optimizer.iterations)}


def _matching(saved_all, directory, owner, optimizer):
    """The saved state for ``owner`` if a same-kind optimizer wrote it; else None (with a warning if the
    checkpoint holds another optimizer's state, which is then left out, as Keras does)."""
    saved, mine = saved_all.get(owner), _optimizer_state(optimizer)
    if saved and saved["class"] == mine["class"] and saved["slot_names"] == mine["slot_names"]:
        return saved
    if saved_all:
        held = ", ".join(f"{o!r} ({s['class']})" for o, s in saved_all.items())
        warnings.warn(f"checkpoint {directory!r} holds the state of optimizer {held}; expected {owner!r} "
                      f"({mine['class']}), so the optimizer state is not restored (the weights are)", stacklevel=4)
    return None


class DeferredOptimizerState:
    """Optimizer state read for a model that has no optimizer yet, held in host memory and restored into
    the first optimizer it gets if that one matches (Keras defers slot restoration the same way)."""

    def __init__(self, reader, trainable):
        self.directory, self.saved, self.arrays = reader.directory, {}, {}
        for owner, saved in reader.state.get("optimizers", {}).items():
            keys = {f"{owner}/{v.path}/{s}": v for v in trainable for s in saved["slot_names"]}
            reader.verify(keys)
            self.saved[owner] = saved
            self.arrays.update({k: reader.array(k) for k in keys})

    def apply(self, owner, optimizer, trainable):
        saved = _matching(self.saved, self.directory, owner, optimizer)
        if saved is None:
            return
        for key, slot in slot_variables({owner: (optimizer, trainable)}).items():
            slot.assign(self.arrays[key])
        optimizer.iterations = saved["iterations"]


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
