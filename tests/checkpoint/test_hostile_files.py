"""A checkpoint read as a stranger's files (issue 37, findings 1, 4 and 5).

A save replaces only a flowlayers checkpoint, never a folder that merely holds a ``manifest.json``.  A load
checks everything before it assigns anything: the manifest (bounded, a regular file, its schema), each file (a
regular file inside the checkpoint: no link followed, no FIFO or device opened), its ``.npy`` header against the
manifest's shape and dtype, its size against header + shape x dtype, its checksum.  Every hostile file below is
refused with a CheckpointError naming the file and what was wrong, by ``load_weights`` (compiled or not),
``flow.train.CheckPoint.load``, ``flow.checkpoint.get`` and ``BackupAndRestore``, with every variable, slot and
step as it was before, within a deadline (a FIFO or ``/dev/zero`` once hung a load), and never printing the size
or checksum of a file outside the checkpoint.
"""
import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework import checkpoint_format as checkpoint
from flowlayers.framework.variable import store

rng = np.random.default_rng(3)
X = rng.normal(size=(80, 8)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32) + (X[:, 1] > 0.5).astype(np.int32)


@pytest.fixture(autouse=True)
def one_device():
    flow.config.gpu_device_num(1)


def mlp(compile=True):
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    model = flow.Model(x, flow.layers.Dense(3)(h))
    if compile:
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit(model, callbacks=()):
    model.fit(X, Y, batch_size=40, epochs=1, verbose=0, callbacks=list(callbacks))


class Interrupt(flow.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def train_job():
    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((40, 8)), y: tp.Numpy.Placeholder((40,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(h, 3, name="out"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss
    return job


# Each way of loading: (make a good checkpoint in a directory and return what a load would change, the load)
def keras_model(tmp_path, compiled=True):
    model = mlp()
    fit(model)
    model.save_weights(tmp_path / "good")
    fit(model)                              # the model now differs from the checkpoint: an assignment would show
    if not compiled:
        weights = model.get_weights()
        model = mlp(compile=False)
        model.set_weights(weights)

    def variables():
        found = model.trainer.checkpoint_variables() if model.optimizer else {w.path: w for w in model.weights}
        return found, model.optimizer.iterations if model.optimizer else None
    return tmp_path / "good", variables, model.load_weights


def job_checkpoint(tmp_path, load):
    flow.clear_session()
    job = train_job()
    job(X[:40], Y[:40])
    flow.train.CheckPoint().save(tmp_path / "good")
    job(X[40:], Y[40:])

    def variables():
        optimizers = flow.train.CheckPoint._optimizers()
        return {**store.variables, **checkpoint.slot_variables(optimizers)}, job.step
    return tmp_path / "good", variables, load


def backup(tmp_path):
    model = mlp()
    with pytest.raises(KeyboardInterrupt):
        fit(model, [flow.callbacks.BackupAndRestore(tmp_path / "good"), Interrupt()])
    model = mlp()
    fit(model)

    def variables():
        return model.trainer.checkpoint_variables(), model.optimizer.iterations

    def load(directory):                    # the damaged checkpoint is <backup_dir>/latest
        fit(model, [flow.callbacks.BackupAndRestore(directory.parent)])
    return tmp_path / "good" / "latest", variables, load


LOADS = {
    "load_weights": lambda tmp_path: keras_model(tmp_path),
    "load_weights before compile": lambda tmp_path: keras_model(tmp_path, compiled=False),
    "CheckPoint.load": lambda tmp_path: job_checkpoint(tmp_path, lambda d: flow.train.CheckPoint().load(d)),
    "flow.checkpoint.get": lambda tmp_path: job_checkpoint(
        tmp_path, lambda d: flow.load_variables(flow.checkpoint.get(d))),
    "BackupAndRestore": backup,
}


# The hostile files: each changes a copy of a good checkpoint and returns the words the refusal must hold ------
def manifest_of(directory):
    return json.loads((directory / checkpoint.MANIFEST).read_text())


def write_manifest(directory, manifest):
    (directory / checkpoint.MANIFEST).write_text(json.dumps(manifest))


def npy(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def header(descr, shape):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def replace(directory, key, data):
    """``data`` as ``key``'s file, with the manifest's size and checksum made to match it: only what the bytes say
    can tell that it is wrong."""
    manifest = manifest_of(directory)
    entry = manifest["variables"][key]
    (directory / entry["file"]).write_bytes(data)
    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    write_manifest(directory, manifest)


def value_of(directory, key):
    return np.load(directory / manifest_of(directory)["variables"][key]["file"])


def victim(directory):
    """The key of the last two-dimensional array: restored after others, so a late refusal would show."""
    return [k for k, e in manifest_of(directory)["variables"].items() if len(e["shape"]) == 2][-1]


def link_outside(directory, key, data, outside, match):
    """``key``'s file made a link to a file outside the checkpoint holding ``data`` (the manifest matching it, or
    not); the refusal must never tell that file's size or checksum."""
    target = outside / f"outside-{len(list(outside.iterdir()))}.npy"
    target.write_bytes(data)
    entry_file = directory / manifest_of(directory)["variables"][key]["file"]
    entry_file.unlink()
    entry_file.symlink_to(os.path.relpath(target, directory))
    if match:
        manifest = manifest_of(directory)
        manifest["variables"][key].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        write_manifest(directory, manifest)
    return ["a symbolic link"], [] if match else [hashlib.sha256(data).hexdigest()[:12], f"{len(data)} bytes"]


def special(directory, key, make):
    path = directory / manifest_of(directory)["variables"][key]["file"] if key else directory / checkpoint.MANIFEST
    path.unlink()
    make(path)


def edit_manifest(change):
    def damage(directory, key, outside):
        manifest = manifest_of(directory)
        words = change(manifest, key)
        write_manifest(directory, manifest)
        return words, []
    return damage


def set_state(name, value):
    def change(manifest, key):
        manifest["state"][name] = value
        return [f"state {name!r}"]
    return change


def set_entry(field, value, words):
    def change(manifest, key):
        manifest["variables"][key][field] = value
        return words
    return change


def huge_iterations(manifest, key):
    for saved in manifest["state"]["optimizers"].values():
        saved["iterations"] = 2 ** 70
    return ["state 'optimizers'"]


def shared_file(manifest, key):
    first = next(iter(manifest["variables"].values()))
    manifest["variables"][key]["file"] = first["file"]
    return ["another entry's too"]


def raw_manifest(text, words):
    def damage(directory, key, outside):
        (directory / checkpoint.MANIFEST).write_bytes(text)
        return words, []
    return damage


def swap(directory, key, outside):
    shape = manifest_of(directory)["variables"][key]["shape"]
    replace(directory, key, npy(value_of(directory, key).T.copy()))
    return ["by its .npy header", f"shape ({shape[1]}, {shape[0]})", f"shape ({shape[0]}, {shape[1]})"], []


def other_dtype(directory, key, outside):
    replace(directory, key, npy(value_of(directory, key).view(np.int32)))
    return ["dtype int32", "dtype float32"], []


def object_dtype(directory, key, outside):
    shape = tuple(manifest_of(directory)["variables"][key]["shape"])
    replace(directory, key, header("|O", shape) + bytes(8 * int(np.prod(shape))))
    return ["dtype object", "never loaded"], []


def huge_header(directory, key, outside):
    replace(directory, key, header("<f4", (10 ** 12,)))
    return ["shape (1000000000000,)"], []


def trailing_bytes(directory, key, outside):
    data = npy(value_of(directory, key))
    replace(directory, key, data + bytes(64))
    return [f"expected {len(data)} bytes", f"received {len(data) + 64}"], []


def not_npy(directory, key, outside):
    replace(directory, key, np.random.default_rng(0).bytes(len(npy(value_of(directory, key)))))
    return ["header numpy cannot read"], []


def too_big_manifest(directory, key, outside):
    os.truncate(directory / checkpoint.MANIFEST, (64 << 20) + 1)       # sparse: nothing is written
    return ["expected at most 67108864 bytes (64 MiB), received 67108865"], []


def linked_manifest(directory, key, outside):
    shutil.copy(directory / checkpoint.MANIFEST, outside / "manifest.json")
    (directory / checkpoint.MANIFEST).unlink()
    (directory / checkpoint.MANIFEST).symlink_to(outside / "manifest.json")
    return [checkpoint.MANIFEST, "a symbolic link"], []


DAMAGES = {
    # finding 4: the bytes and their checksum agree; what they say does not
    "header of another shape": swap,
    "header of another dtype": other_dtype,
    "header of dtype object": object_dtype,
    "header claiming 1e12 elements": huge_header,
    "bytes beyond the array": trailing_bytes,
    "not an .npy file": not_npy,
    # finding 5: special files
    "link to a matching file outside": lambda d, k, o: link_outside(d, k, npy(value_of(d, k) + 7), o, match=True),
    "link to another file outside": lambda d, k, o: link_outside(d, k, npy(value_of(d, k)[:1]), o, match=False),
    "link to /dev/zero": lambda d, k, o: (special(d, k, lambda p: p.symlink_to("/dev/zero")), ["a symbolic link"],
                                          [])[1:],
    "FIFO": lambda d, k, o: (special(d, k, os.mkfifo), ["a FIFO"], [])[1:],
    "directory": lambda d, k, o: (special(d, k, os.mkdir), ["a directory"], [])[1:],
    "manifest a FIFO": lambda d, k, o: (special(d, None, os.mkfifo), [checkpoint.MANIFEST, "a FIFO"], [])[1:],
    "manifest a link": linked_manifest,
    "manifest over 64 MiB": too_big_manifest,
    # finding 5: malformed manifests
    "manifest nested 100000 deep": raw_manifest(b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
    "manifest with a 5000-digit number": raw_manifest(b'{"format": 1' + b"0" * 5000 + b"}", ["not valid JSON"]),
    "manifest not UTF-8": raw_manifest(b"\xff\xfe\x00{", ["not valid JSON"]),
    "rng a list": edit_manifest(set_state("rng", [0])),
    "position a list": edit_manifest(set_state("position", [1, 2])),
    "model a string": edit_manifest(set_state("model", "Sequential")),
    "optimizer step beyond int64": edit_manifest(huge_iterations),
    "dtype object in the manifest": edit_manifest(set_entry("dtype", "object", ["expected a dtype among"])),
    "entry naming the manifest": edit_manifest(set_entry("file", "manifest.json", ["expected fields"])),
    "entry sharing a file": edit_manifest(shared_file),
    "checksum not hex": edit_manifest(set_entry("sha256", "z" * 64, ["expected fields"])),
}


@contextlib.contextmanager
def deadline(seconds, what):
    def expire(signum, frame):
        raise TimeoutError(f"{what}: still running after {seconds} s (a load that hangs)")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(variables):
    found, step = variables()
    return {key: var.numpy().copy() for key, var in found.items()}, step


@pytest.mark.parametrize("load", sorted(LOADS))
def test_every_hostile_file_is_refused_before_any_variable_changes(load, tmp_path):
    good, variables, action = LOADS[load](tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    key = victim(good)
    for i, (name, damage) in enumerate(DAMAGES.items()):
        case = tmp_path / f"case{i}"
        shutil.copytree(good.parent if load == "BackupAndRestore" else good,
                        case / "backup" if load == "BackupAndRestore" else case, symlinks=True)
        directory = case / "backup" / "latest" if load == "BackupAndRestore" else case
        words, secrets = damage(directory, key, outside)
        before = snapshot(variables)
        try:
            with deadline(20, f"{load} of {name}"):
                action(directory)
        except flow.CheckpointError as e:
            message = str(e)
        except Exception as e:  # noqa: BLE001 - any other error is the bug this test is about
            pytest.fail(f"{load} of a checkpoint with {name}: expected a CheckpointError, received "
                        f"{type(e).__name__}: {e}")
        else:
            pytest.fail(f"{load} of a checkpoint with {name}: expected a CheckpointError, it loaded")
        after = snapshot(variables)
        assert after[1] == before[1], f"{load} of {name}: the step changed"
        changed = [k for k in before[0] if not np.array_equal(before[0][k], after[0][k])]
        assert not changed, f"{load} of {name}: {changed} changed before the refusal"
        assert str(directory) in message, (name, message)
        for word in words:
            assert word in message, (name, word, message)
        for secret in secrets:
            assert secret not in message, (name, secret, message)


def test_an_npy_file_in_fortran_order_and_a_manifest_without_sizes_still_load(tmp_path):
    """What numpy itself may write (a Fortran-ordered array) and checkpoints written before sizes were recorded."""
    flow.config.gpu_device_num(1)
    model = mlp()
    fit(model)
    model.save_weights(tmp_path / "ckpt")
    saved = model.get_weights()
    key = victim(tmp_path / "ckpt")
    replace(tmp_path / "ckpt", key, npy(np.asfortranarray(value_of(tmp_path / "ckpt", key))))
    manifest = manifest_of(tmp_path / "ckpt")
    for entry in manifest["variables"].values():
        del entry["bytes"]
    write_manifest(tmp_path / "ckpt", manifest)
    fit(model)
    model.load_weights(tmp_path / "ckpt")
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved))


def test_a_save_never_replaces_a_folder_that_is_not_a_flowlayers_checkpoint(tmp_path):
    """Finding 1: a folder holding a file named manifest.json (a web site) is the user's, and so is a checkpoint
    to which a file was added by hand, and a folder at one of the names a save uses beside the checkpoint."""
    model = mlp()
    site = tmp_path / "site"
    site.mkdir()
    (site / "manifest.json").write_text("{}")
    (site / "index.html").write_text("x")
    model.save_weights(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "notes.txt").write_text("mine")
    aside = tmp_path / ".other.old"
    aside.mkdir()
    (aside / "keep.txt").write_text("mine too")
    cases = [(site, "a directory holding other files ['index.html', 'manifest.json'], whose manifest.json is not a "
                    "flowlayers checkpoint's (it expected a manifest with 'variables' and 'state', received {})"),
             (tmp_path / "ckpt", "a flowlayers checkpoint that also holds files it does not name ['notes.txt']"),
             (tmp_path / "other", f"expected {str(aside)!r} to be what a killed save of it left (a save uses that "
                                  f"name), received a directory holding other files ['keep.txt']")]
    for path, words in cases:
        with pytest.raises(flow.CheckpointError) as e:
            model.save_weights(path)
        assert repr(str(path)) in str(e.value) and words in str(e.value), str(e.value)
    assert (site / "index.html").read_text() == "x" and (site / "manifest.json").read_text() == "{}"
    assert sorted(p.name for p in site.iterdir()) == ["index.html", "manifest.json"]
    assert (tmp_path / "ckpt" / "notes.txt").read_text() == "mine" and (aside / "keep.txt").read_text() == "mine too"
    assert checkpoint.Reader(tmp_path / "ckpt").entries        # the checkpoint itself is whole and loads
    model.load_weights(tmp_path / "ckpt")


@pytest.mark.slow
def test_a_manifest_linked_to_dev_zero_is_refused_without_reading_it(tmp_path):
    """Finding 5: read with a 2 GiB address-space limit, in a process of its own, with a deadline."""
    checkpoint.write(tmp_path / "ckpt", {"w": np.ones(3, np.float32)})
    (tmp_path / "ckpt" / checkpoint.MANIFEST).unlink()
    (tmp_path / "ckpt" / checkpoint.MANIFEST).symlink_to("/dev/zero")
    program = ("import resource, sys\n"
               "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
               "from flowlayers.framework import checkpoint_format\n"
               "try:\n"
               "    checkpoint_format.Reader(sys.argv[1])\n"
               "except checkpoint_format.CheckpointError as e:\n"
               "    sys.exit(str(e))\n")
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "ckpt")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and f"file {tmp_path / 'ckpt' / checkpoint.MANIFEST} expected a regular file, " \
                                   f"received a symbolic link" in done.stderr, done.stderr[-2000:]


def test_a_damaged_whole_model_description_is_refused_by_name(tmp_path):
    """Finding 5 for ``load_model``: wrong types in the saved architecture (once an AttributeError), and the abstract
    ``Loss`` base class as the loss (once loaded, then NotImplementedError('') at the first ``fit``)."""
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(3)(x))
    model.compile("adam", "mse")
    model.save(tmp_path / "model")

    def optimizer_config_a_string(description):
        description["compile"]["optimizer"]["config"] = "adam"

    def the_abstract_loss(description):
        description["compile"]["loss"] = {"class_name": "Loss", "module": "flowlayers.losses", "config": {}}

    for change, words in ((optimizer_config_a_string, "the saved architecture is damaged (AttributeError"),
                          (the_abstract_loss, "is of class 'Loss' (module 'flowlayers.losses'), which is not one of "
                                              "flowlayers'")):
        case = tmp_path / change.__name__
        shutil.copytree(tmp_path / "model", case)
        manifest = manifest_of(case)
        change(manifest["state"]["model"])
        write_manifest(case, manifest)
        with pytest.raises(flow.CheckpointError) as e:
            flow.models.load_model(case)
        assert f"flow.models.load_model({str(case)!r})" in str(e.value) and words in str(e.value), str(e.value)


def test_a_directory_oneflow_wrote_is_read_only_through_regular_files(tmp_path):
    """``flow.checkpoint.get`` of OneFlow's own layout (``<name>/out`` and ``<name>/meta``): a link in it is not
    followed and a FIFO never opened."""
    outside = tmp_path / "secret"
    np.arange(6, dtype=np.float32).tofile(outside)
    for name, make in (("linked_out", lambda d: (d / "out").symlink_to(outside)),
                       ("fifo_out", lambda d: os.mkfifo(d / "out")),
                       ("linked_meta", lambda d: None)):
        case = tmp_path / name
        case.mkdir()
        (case / "meta").write_text("shape {\n  dim: 6\n}\ndata_type: kFloat\n")
        if name == "linked_meta":
            np.zeros(6, np.float32).tofile(case / "out")
            (case / "meta").rename(tmp_path / "meta")
            (case / "meta").symlink_to(tmp_path / "meta")
        make(case)
        with deadline(20, f"flow.checkpoint.get of {name}"), pytest.raises(flow.CheckpointError) as e:
            flow.checkpoint.get(case).numpy()
        assert "expected a regular file, received a symbolic link" in str(e.value) or name == "fifo_out", str(e.value)
