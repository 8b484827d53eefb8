"""Checkpoints: logical (unsharded) arrays keyed by variable path, a manifest with checksums,
written atomically (a crash mid-save leaves the previous checkpoint whole).

One variable is gathered at a time, so host memory is bounded by the largest
variable.  Loading checks every name, shape and checksum before it writes
anything, so a bad checkpoint leaves the model as it was.
"""
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

from .errors import CheckpointError, describe_shape

MANIFEST = "manifest.json"
FORMAT = "flowlayers-checkpoint-1"


def save(directory, variables, extra=None):
    """Write ``variables`` (path -> Variable) and JSON-able ``extra`` into ``directory``."""
    directory = os.path.abspath(os.fspath(directory))
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(directory) + "-", dir=parent)
    try:
        entries = {}
        for i, (path, var) in enumerate(variables.items()):
            value = var.numpy()
            fname = f"{i:05d}.npy"
            with open(os.path.join(tmp, fname), "wb") as f:
                np.save(f, value, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            entries[path] = {"file": fname, "shape": list(value.shape), "dtype": str(value.dtype),
                             "sha256": _sha256(os.path.join(tmp, fname))}
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump({"format": FORMAT, "variables": entries, "extra": extra or {}}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        old = directory + ".old"
        if os.path.exists(directory):
            shutil.rmtree(old, ignore_errors=True)
            os.rename(directory, old)
        os.rename(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read(directory, variables):
    """Verified arrays for ``variables`` (path -> Variable) and the checkpoint's ``extra``; writes nothing."""
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, MANIFEST)
    if not os.path.exists(manifest_path) and os.path.exists(directory + ".old"):
        directory, manifest_path = directory + ".old", os.path.join(directory + ".old", MANIFEST)
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {directory!r}: expected a directory with {MANIFEST}, received none "
                              f"(no checkpoint saved there)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint {directory!r} is damaged: {manifest_path} is not valid JSON ({e})") from None
    entries = manifest.get("variables", {})
    missing = [p for p in variables if p not in entries]
    if missing:
        raise CheckpointError(f"checkpoint {directory!r}: expected variables {missing[:5]}"
                              f"{' ...' if len(missing) > 5 else ''}, received a checkpoint without them "
                              f"(it holds {sorted(entries)[:5]}{' ...' if len(entries) > 5 else ''})")
    arrays = {}
    for path, var in variables.items():
        entry = entries[path]
        if tuple(entry["shape"]) != var.shape:
            raise CheckpointError(f"checkpoint {directory!r}: variable {path!r} expected shape "
                                  f"{describe_shape(var.shape)}, received {describe_shape(tuple(entry['shape']))}")
        fname = os.path.join(directory, entry["file"])
        if not os.path.exists(fname) or _sha256(fname) != entry["sha256"]:
            raise CheckpointError(f"checkpoint {directory!r} is damaged: file {fname} of variable {path!r} is "
                                  f"missing or fails its checksum")
        arrays[path] = np.load(fname, allow_pickle=False)
    return arrays, manifest.get("extra", {})


def load(directory, variables):
    arrays, extra = read(directory, variables)
    for path, var in variables.items():
        var.assign(arrays[path])
    return extra


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
