"""Checkpoints: logical (unsharded) arrays keyed by variable path, a manifest with checksums,
written atomically (a crash mid-save leaves the previous checkpoint whole).

One format serves ``model.save_weights`` and ``flow.train.CheckPoint``::

    <dir>/00000.npy ...        one logical array per variable (weights and optimizer slots)
    <dir>/manifest.json        {"format", "variables": {key: {file, shape, dtype, bytes, sha256}}, "state": {...}}

``state`` holds what resuming needs besides arrays: ``optimizers`` (owner ->
class, slot names, step counter), ``rng`` (the seed; dropout is stateless in
seed, op and step, so seed + step is the whole random state) and, when saved
from inside ``fit``, ``position`` (epoch, batches done in it, running metric sums).

One variable is gathered (on save) or loaded (on restore) at a time, so host
memory is bounded by the largest variable.  Restoring checks every name,
shape, dtype, file size and checksum before it writes anything, so a bad
checkpoint leaves the model as it was; then it reads each file once more,
checks the checksum of those very bytes and assigns the array made from them,
so no array is ever assigned unverified.  A checkpoint holding weights the
model does not have (a bigger architecture) is refused too; optimizer slots of
an optimizer the model lacks are not weights, and are left out with a warning.

Dtypes: a float array loads into a float variable of any width, cast to the
variable's dtype as Keras casts on load (a float64 checkpoint loads into a
float32 model, rounded to float32); any other dtype must match exactly, since
an integer cast could wrap silently.

    checkpoint.save("ckpt", {"dense/kernel": kernel})
    checkpoint.Reader("ckpt").restore({"dense/kernel": kernel})
"""
import glob
import hashlib
import io
import json
import os
import shutil
import tempfile
import warnings

import numpy as np

from .. import config, dtypes, engine, env
from ..errors import CheckpointError, describe_shape

MANIFEST = "manifest.json"
FORMAT = "flowlayers-checkpoint-2"


def save(directory, variables, state=None):
    """Write ``variables`` (key -> Variable) and the JSON-able ``state`` into ``directory``, atomically.

    In a job of several processes every process calls this (as every process of a one-process program would): each
    reads the whole logical values (a collective read), process 0 alone writes them, and all return once the
    checkpoint is in place.  Processes on several hosts need ``directory`` on a file system they share."""
    directory = os.path.abspath(os.fspath(directory))
    for path in (directory, directory + ".old"):
        _check_replaceable(path)
    values = {key: var.numpy() for key, var in variables.items()}
    if env.process_index() == 0:
        _write(directory, values, state)
    engine.barrier(f"checkpoint {directory}")


def _write(directory, values, state):
    parent, name = os.path.split(directory)
    os.makedirs(parent, exist_ok=True)
    for stale in _tmp_dirs(parent, name):   # left by a killed save
        shutil.rmtree(stale, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=tmp_prefix(name), dir=parent)
    try:
        entries = {}
        for i, (key, value) in enumerate(values.items()):
            fname = f"{i:05d}.npy"
            with open(os.path.join(tmp, fname), "wb") as f:
                np.save(f, value, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            entries[key] = {"file": fname, "shape": list(value.shape), "dtype": str(value.dtype),
                            "bytes": os.path.getsize(os.path.join(tmp, fname)),
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


def refuse_existing(path, overwrite, where):
    """``overwrite=False`` and ``path`` exists: a CheckpointError (Keras would ask; a program cannot be asked)."""
    if not overwrite and os.path.exists(path):
        raise CheckpointError(f"{where}: {os.fspath(path)!r} exists and overwrite=False; expected a new path, or pass "
                              f"overwrite=True")


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


DAMAGED_FIX = "restore the checkpoint from a copy or save it again"


class Reader:
    """One checkpoint on disk: its manifest read and checked, its arrays verified before any is assigned.

        reader = Reader("ckpt")
        reader.restore({"dense/kernel": kernel})     # checks all, then assigns each verified array
    """

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
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} is not valid JSON ({e}); "
                                  f"{DAMAGED_FIX}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("variables"), dict) \
                or not isinstance(manifest.get("state", {}), dict):
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} expected a manifest with "
                                  f"'variables' and 'state', received {_brief(manifest)}; {DAMAGED_FIX}")
        for key, entry in manifest["variables"].items():
            if not _is_entry(entry):
                raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} entry {key!r} expected "
                                      f"fields file/shape/dtype/sha256, received {_brief(entry)}; {DAMAGED_FIX}")
        self.entries = manifest["variables"]
        self.state = manifest.get("state", {})
        self.optimizers = self.state.get("optimizers", {})
        if not isinstance(self.optimizers, dict) or not all(map(_is_optimizer_state, self.optimizers.values())):
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {path} state 'optimizers' expected "
                                  f"owner -> fields class/slot_names/iterations, received {_brief(self.optimizers)}; "
                                  f"{DAMAGED_FIX}")

    def check(self, variables):
        """Every key of ``variables`` (key -> Variable) present with the variable's shape and a dtype it takes."""
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
                                      f"(a checkpoint of another architecture); load it into a model built like "
                                      f"the one that saved it")
            if not _takes(var.dtype, entry["dtype"]):
                raise CheckpointError(f"checkpoint {self.directory!r}: variable {key!r} expected dtype "
                                      f"{var.dtype.name}, received {entry['dtype']}; load it into a model whose "
                                      f"variable has dtype {entry['dtype']}")

    def extra_weights(self, weights):
        """Keys held beyond ``weights`` that are not optimizer slots: weights of a bigger architecture."""
        return sorted(k for k in self.entries if k not in weights and not self._is_slot(k))

    def refuse_extra_weights(self, weights):
        extra = self.extra_weights(weights)
        if extra:
            mine = sorted(weights)
            raise CheckpointError(f"checkpoint {self.directory!r}: expected only the model's variables "
                                  f"{mine[:5]}{' ...' if len(mine) > 5 else ''}, received a checkpoint that also "
                                  f"holds {extra[:5]}{' ...' if len(extra) > 5 else ''} (a checkpoint of a bigger "
                                  f"architecture); load it into the model it was saved from")

    def _is_slot(self, key):
        """A key ``<owner>/<variable path>/<slot name>`` of an optimizer whose state the checkpoint holds."""
        return any(key.startswith(owner + "/") and key.endswith(tuple("/" + s for s in saved["slot_names"]))
                   for owner, saved in self.optimizers.items())

    def path(self, key):
        return os.path.join(self.directory, self.entries[key]["file"])

    def verify(self, keys, why="is damaged", fix=DAMAGED_FIX):
        """Every file of ``keys`` whole: its size and checksum as the manifest says, read in chunks."""
        for key in keys:
            try:
                size, digest = os.path.getsize(self.path(key)), _sha256(self.path(key))
            except FileNotFoundError:
                size, digest = None, None
            self._check_file(key, size, digest, why, fix)

    def read(self, key, why="is damaged", fix=DAMAGED_FIX):
        """The array of ``key``, made from bytes read once and checked against the manifest's checksum."""
        try:
            with open(self.path(key), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = None
        self._check_file(key, None if data is None else len(data),
                         None if data is None else hashlib.sha256(data).hexdigest(), why, fix)
        value = np.load(io.BytesIO(data), allow_pickle=False)
        if value.dtype.kind == "V":     # numpy writes dtypes it does not know (bfloat16) as raw bytes
            value = value.view(dtypes.as_dtype(self.entries[key]["dtype"]).numpy)
        return value

    def _check_file(self, key, size, digest, why, fix):
        entry = self.entries[key]
        if digest == entry["sha256"] and size == entry.get("bytes", size):
            return
        expected = (f"{entry['bytes']} bytes with " if "bytes" in entry else "") + f"sha256 {entry['sha256'][:12]}..."
        received = "no file (missing)" if digest is None else f"{size} bytes with sha256 {digest[:12]}..."
        raise CheckpointError(f"checkpoint {self.directory!r} {why}: file {self.path(key)} (variable {key!r}) "
                              f"expected {expected}, received {received}; {fix}")

    def restore(self, variables, why="is damaged", fix=DAMAGED_FIX):
        """Check and verify all of ``variables`` (key -> Variable), then read, re-verify and assign each in turn."""
        self.check(variables)
        self.verify(variables, why, fix)
        done = []
        for key, var in variables.items():
            if done:    # verified a moment ago: a mismatch now means the files are being replaced under us
                why, fix = "changed while it was being restored", (
                    f"{len(done)} variable(s) ({', '.join(done[:3])}{' ...' if len(done) > 3 else ''}) were "
                    f"restored from it and the others were not; load it again once nothing writes to it")
            var.assign(self.read(key, why, fix))
            done.append(key)


def _is_entry(entry):
    return (isinstance(entry, dict) and isinstance(entry.get("file"), str)
            and entry["file"] not in ("", ".", "..") and os.path.basename(entry["file"]) == entry["file"]
            and isinstance(entry.get("shape"), list) and all(_is_count(d) for d in entry["shape"])
            and isinstance(entry.get("dtype"), str) and isinstance(entry.get("sha256"), str)
            and _is_count(entry.get("bytes", 0)))


def _is_optimizer_state(saved):
    return (isinstance(saved, dict) and isinstance(saved.get("class"), str)
            and isinstance(saved.get("slot_names"), list) and all(isinstance(s, str) for s in saved["slot_names"])
            and _is_count(saved.get("iterations")))


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _brief(value):
    text = json.dumps(value) if isinstance(value, (dict, list)) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _takes(dtype, saved):
    """Whether a variable of ``dtype`` takes an array saved as ``saved``: a float one any float (cast)."""
    if saved == dtype.name:
        return True
    return dtype.is_floating and saved in dtypes.ALL and dtypes.ALL[saved].is_floating


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
            for var in variables if var.trainable for name, slot in zip(opt.all_slot_names, opt.slots(var))}


def restore(directory, weights, optimizers, extra_weights="refuse"):
    """Restore ``weights`` (key -> Variable) and the state of each optimizer saved by one of the same kind.

    A checkpoint holding weights beyond ``weights`` is refused (``extra_weights="refuse"``) or loaded with a
    warning naming them (``"warn"``).  Everything is verified before anything is written; returns the Reader
    (its ``state`` has the position).
    """
    reader = _open(directory, weights, extra_weights)
    plan, steps = dict(weights), []
    for owner, (opt, trainable) in optimizers.items():
        saved = _matching(reader.optimizers, reader.directory, owner, opt)
        if saved is not None:
            plan.update(slot_variables({owner: (opt, trainable)}))
            steps.append((opt, saved["iterations"]))
    reader.restore(plan)
    for opt, step in steps:
        opt.iterations = step
    return reader


def restore_before_compile(directory, weights, trainable):
    """Restore ``weights`` of a model without an optimizer; returns the Reader and the DeferredOptimizerState
    that the optimizer ``compile`` gives is restored from."""
    reader = _open(directory, weights, "refuse")
    deferred = DeferredOptimizerState(reader, trainable)
    reader.restore(weights)
    return reader, deferred


def _open(directory, weights, extra_weights):
    reader = Reader(directory)
    reader.check(weights)
    if extra_weights == "refuse":
        reader.refuse_extra_weights(weights)
    elif reader.extra_weights(weights):
        warnings.warn(f"checkpoint {reader.directory!r} holds variables no job uses, left out: "
                      f"{reader.extra_weights(weights)}", stacklevel=3)
    return reader


def _optimizer_state(optimizer):
    return {"class": type(optimizer).__name__, "slot_names": list(optimizer.all_slot_names),
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
    """Optimizer state of a checkpoint loaded into a model that has no optimizer yet, restored into the first
    optimizer it gets if that one matches (Keras defers slot restoration the same way).

    It holds the Reader only (the manifest with its checksums), not the arrays: when the optimizer arrives,
    every slot file is verified again, then read, checked and assigned one at a time, so host memory stays
    bounded by the largest variable and files that changed meanwhile are refused before any is assigned.
    """

    def __init__(self, reader, trainable):
        self.reader = reader
        for owner, saved in reader.optimizers.items():
            keys = {f"{owner}/{v.path}/{s}": v for v in trainable if v.trainable for s in saved["slot_names"]}
            reader.check(keys)
            reader.verify(keys)     # a damaged checkpoint is refused by load_weights, not later by fit

    def apply(self, owner, optimizer, trainable):
        saved = _matching(self.reader.optimizers, self.reader.directory, owner, optimizer)
        if saved is None:
            return
        self.reader.restore(slot_variables({owner: (optimizer, trainable)}),
                            why="changed or vanished since load_weights read it",
                            fix="nothing of the optimizer state was restored (the weights were); put the checkpoint "
                                "back and train again, or call load_weights again now that the model is compiled")
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
