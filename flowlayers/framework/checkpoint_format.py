"""Checkpoints: logical (unsharded) arrays keyed by variable path and a manifest with checksums, in a
directory that a save owns and replaces whole, and that a kill at any point of a save leaves loadable.

One format serves ``model.save_weights`` and ``flow.train.CheckPoint``::

    <dir>/00000.npy ...        one logical array per variable (weights and optimizer slots)
    <dir>/manifest.json        {"format", "variables": {key: {file, shape, dtype, bytes, sha256}}, "state": {...}}

``state`` holds what resuming needs besides arrays: ``optimizers`` (owner ->
class, slot names, step counter), ``rng`` (the seed; dropout is stateless in
seed, op and step, so seed + step is the whole random state) and, when saved
from inside ``fit``, ``position`` (epoch, batches done in it, running metric sums).

Writing.  A save replaces ``<dir>`` only if it is absent, an empty directory or a flowlayers checkpoint (a
manifest of this format, and no file the manifest does not name): never a folder of the user's.  Beside it, it
uses ``.<name>.tmp-<pid>-<random>-<host>`` (its own temporary directory), ``.<name>.new`` (the checkpoint being
put in place), ``.<name>.old`` (the one it replaces) and ``.<name>.lock``.  Each file is written and fsynced in
the temporary directory, the manifest last; then, holding an exclusive ``flock`` of the lock file:

    recover                          what a killed save left is finished or undone (below)
    temp -> .<name>.new              the commit point: from here on, the new checkpoint is the one kept
    <dir> -> .<name>.old
    .<name>.new -> <dir>             and an fsync of the parent directory
    .<name>.old removed              its files, then its manifest, then itself: a part left is still known

Recovery, on the next save or load: of ``.<name>.new``, ``<dir>`` and ``.<name>.old``, the newest *complete*
one (its manifest parses and every file it names is a regular file of the size it gives) becomes ``<dir>`` and
the others are removed; temporary directories whose writer no longer runs on this host are removed.  Two saves
to one path each write their own temporary directory and swap one after the other: the later one wins.

Reading.  One variable is gathered (on save) or loaded (on restore) at a time, so host memory is bounded by
the largest variable.  Restoring checks everything before it writes anything: the manifest (at most
MANIFEST_LIMIT bytes, a regular file, its schema), every name, shape and dtype against the variables, and
every file: a regular file inside the checkpoint (a link is not followed, a FIFO or device not opened), its
``.npy`` header saying the manifest's shape and dtype (never an object dtype), its size exactly header + shape
x dtype, its checksum.  So a bad checkpoint leaves the model as it was.  Then it reads each file once more,
checks the checksum of those very bytes and assigns the array made from them, so no array is ever assigned
unverified.  A checkpoint holding weights the model does not have (a bigger architecture) is refused too;
optimizer slots of an optimizer the model lacks are not weights, and are left out with a warning.

Dtypes: a float array loads into a float variable of any width, cast to the
variable's dtype as Keras casts on load (a float64 checkpoint loads into a
float32 model, rounded to float32); any other dtype must match exactly, since
an integer cast could wrap silently.

    checkpoint.save("ckpt", {"dense/kernel": kernel})
    checkpoint.Reader("ckpt").restore({"dense/kernel": kernel})
"""
import contextlib
import errno
import fcntl
import hashlib
import io
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import time
import types
import warnings

import numpy as np

from .. import dtypes, engine, env
from ..errors import CheckpointError, describe_shape

MANIFEST = "manifest.json"
FORMAT = "flowlayers-checkpoint-2"
MANIFEST_LIMIT = 64 << 20       # bytes; a manifest names files and shapes, more is not one
HEADER_LIMIT = 10_000           # bytes of an .npy header (numpy's own limit when it reads one)
LOCK_WAIT = 600                 # seconds a save or load waits for another one's swap of the same checkpoint
CHUNK = 1 << 20
HOST = socket.gethostname()[:64]

# The steps of a save, in order.  ``at_step`` (tests set it, in a process they kill) is called with each as the
# save passes it: "file written" after each array file, "removing" after each file removed from a replaced one.
STEPS = ("file written", "temp complete", "locked", "staged", "moved aside", "committed", "removing", "old removed")
at_step = None


def _step(name):
    if at_step is not None:
        at_step(name)


def save(directory, variables, state=None):
    """Write ``variables`` (key -> Variable) and the JSON-able ``state`` into ``directory``, replacing it whole.

    In a job of several processes every process calls this (as every process of a one-process program would): each
    reads the whole logical values (a collective read), process 0 alone writes them, and all return once the
    checkpoint is in place.  Processes on several hosts need ``directory`` on a file system they share."""
    directory = os.path.abspath(os.fspath(directory))
    _refuse_foreign(directory)          # in every process alike, before the collective read
    values = {key: var.numpy() for key, var in variables.items()}
    if env.process_index() == 0:
        write(directory, values, state)
    engine.barrier(f"checkpoint {directory}")


def write(directory, values, state=None):
    """Write the arrays ``values`` (key -> numpy array) and ``state`` as checkpoint ``directory``, from this process
    alone: into a temporary directory, then swapped in under the lock (the steps are in this module's docstring)."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    _refuse_foreign(directory)
    with _os_errors(directory, "making its temporary directory"):
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f"{tmp_prefix(name)}{os.getpid()}-{secrets.token_hex(4)}-{HOST}")
        os.mkdir(tmp, 0o700)
    try:
        _fill(directory, tmp, values, state)
        _step("temp complete")
        with _os_errors(directory, "putting the new checkpoint in place (the next save or load completes or undoes "
                                   "what was done)"), _Lock(directory, exclusive=True):
            _recover(directory, saving=True)
            _refuse_foreign(directory)
            _step("locked")
            _commit(directory, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fill(directory, tmp, values, state):
    """Every array, then the manifest, into ``tmp``, each file fsynced."""
    entries = {}
    for i, (key, value) in enumerate(values.items()):
        value = np.asarray(value)
        if not value.flags.c_contiguous:
            value = value.copy(order="C")
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(value))
        fname = f"{i:05d}.npy"
        size, digest = _write_file(directory, os.path.join(tmp, fname),
                                   [header.getvalue(), value.reshape(-1).view(np.uint8)])
        entries[key] = {"file": fname, "shape": list(value.shape), "dtype": str(value.dtype), "bytes": size,
                        "sha256": digest}
        _step("file written")
    text = json.dumps({"format": FORMAT, "variables": entries, "state": state or {}}, indent=1)
    _write_file(directory, os.path.join(tmp, MANIFEST), [text.encode()])
    with _os_errors(directory, f"syncing {tmp}"):
        _fsync_dir(tmp)


def _write_file(directory, path, parts):
    """Write the byte buffers ``parts`` as the new file ``path`` and fsync it; returns its size and sha256.  An
    OSError (a full disk, a file size limit) is a CheckpointError naming the file and the bytes it lacks."""
    size, written, digest = sum(memoryview(p).nbytes for p in parts), 0, hashlib.sha256()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            for part in parts:
                view = memoryview(part).cast("B")
                digest.update(view)
                while view:
                    done = os.write(fd, view[:CHUNK])
                    view, written = view[done:], written + done
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise CheckpointError(f"checkpoint {directory!r}: writing {path} failed after {written} of {size} bytes "
                              f"({size - written} missing): {e.strerror or e}; nothing was replaced (the previous "
                              f"checkpoint, if any, is as it was) and the partial save was removed; free space on "
                              f"that file system, or choose another path, and save again") from None
    return size, digest.hexdigest()


def _commit(directory, tmp):
    """The swap (lock held, leftovers recovered): temp -> .new, <dir> -> .old, .new -> <dir>, .old removed."""
    new, old = _staged(directory), _aside(directory)
    os.rename(tmp, new)
    _step("staged")
    if os.path.lexists(directory):
        os.rename(directory, old)
        _step("moved aside")
    os.rename(new, directory)
    _fsync_dir(os.path.dirname(directory))
    _step("committed")
    if os.path.lexists(old):
        _remove(old)
        _fsync_dir(os.path.dirname(directory))
    _step("old removed")


def _recover(directory, saving):
    """With the lock held: of .<name>.new (a save killed after its commit point), <dir> and .<name>.old (the
    checkpoint a killed save was replacing), the newest complete one becomes <dir> and the others are removed;
    then dead writers' temporary directories.  ``saving``: a leftover not made by a save is refused (a load leaves
    it alone), and incomplete leftovers are removed even when nothing is complete."""
    new, old = _staged(directory), _aside(directory)
    found = {path: _examine(path) for path in (new, directory, old)}
    for path in (new, old):
        if saving and found[path].foreign:
            raise CheckpointError(f"checkpoint {directory!r}: expected {path!r} to be what a killed save of it left "
                                  f"(a save uses that name), received {found[path].what}; move it away or choose "
                                  f"another path")
    best = next((path for path in (new, directory, old) if found[path].complete), None)
    if best not in (None, directory) and not found[directory].foreign:
        if found[directory].ours:
            _remove(directory)
        os.rename(best, directory)
        _fsync_dir(os.path.dirname(directory))
        found[directory], found[best], best = found[best], _Found("absent"), directory
    if best == directory or saving:
        for path in (new, old):
            if path != best and found[path].ours:
                _remove(path)
    for tmp in _dead_temps(directory):
        shutil.rmtree(tmp, ignore_errors=True)


class _Found:
    """What a path holds, for a save: nothing, an empty directory, a checkpoint (``ours``; ``complete`` when every
    file its manifest names is there with its size), a checkpoint being removed, or something else (``foreign``,
    described by ``what``)."""

    def __init__(self, kind, what="", files=(), complete=False):
        self.kind, self.what, self.files, self.complete = kind, what, tuple(files), complete
        self.ours = kind in ("empty", "checkpoint")
        self.foreign = kind == "foreign"


def _examine(path):
    """The ``_Found`` of ``path``, read through one handle of the directory; looked at again if it was renamed
    meanwhile (another save's swap), so that it describes what is at ``path``."""
    for _ in range(10):
        found, settled = _examine_once(path)
        if settled:
            break
    return found


def _examine_once(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return _Found("absent"), True
    except OSError as e:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return _Found("absent"), True      # not reachable: making it says why
        what = ("an existing file" if stat.S_ISREG(mode) else f"a directory that cannot be read ({e.strerror})"
                if stat.S_ISDIR(mode) else _kind(mode))
        return _Found("foreign", what), True
    try:
        return _found_in(fd), _same_file(fd, path)
    finally:
        os.close(fd)


def _found_in(fd):
    names = sorted(os.listdir(fd))
    shown = f"a directory holding other files {names[:5]}{' ...' if len(names) > 5 else ''}"
    if not names:
        return _Found("empty")
    if MANIFEST not in names:
        return _Found("foreign", shown)
    try:
        entries = _read_manifest(MANIFEST, fd)["variables"].values()
    except FileNotFoundError:       # removed since listed: a recovery is removing it (a save looks without the lock)
        return _Found("changing")
    except (_Damaged, OSError) as e:
        return _Found("foreign", f"{shown}, whose {MANIFEST} is not a flowlayers checkpoint's (it {e})")
    files = {entry["file"] for entry in entries}
    extra = [n for n in names if n != MANIFEST and n not in files]
    if extra:
        return _Found("foreign", f"a flowlayers checkpoint that also holds files it does not name "
                                 f"{extra[:5]}{' ...' if len(extra) > 5 else ''}")
    sizes = {}
    for name in set(names) & files:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                return _Found("foreign", f"a flowlayers checkpoint whose {name} is a directory")
            sizes[name] = st.st_size if stat.S_ISREG(st.st_mode) else None
    complete = all(sizes.get(e["file"]) is not None and sizes[e["file"]] == e.get("bytes", sizes[e["file"]])
                   for e in entries)
    return _Found("checkpoint", files=files, complete=complete)


def _refuse_foreign(directory):
    found = _examine(directory)
    if found.foreign:
        raise CheckpointError(f"checkpoint {directory!r}: expected a new path, an empty directory or an earlier "
                              f"flowlayers checkpoint to replace, received {found.what}; choose another path (a save "
                              f"replaces the whole directory)")


def _remove(path):
    """Remove a checkpoint directory made by a save: the files its manifest names, then the manifest, then the
    directory, so that a part a kill leaves is still known as a checkpoint (incomplete)."""
    found = _examine(path)
    if not found.ours:
        raise CheckpointError(f"checkpoint {path!r}: expected a checkpoint to remove, received {found.what}")
    for name in sorted(found.files):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, name))
        _step("removing")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(path, MANIFEST))
    os.rmdir(path)


def refuse_existing(path, overwrite, where):
    """``overwrite=False`` and ``path`` exists: a CheckpointError (Keras would ask; a program cannot be asked)."""
    if not overwrite and os.path.exists(path):
        raise CheckpointError(f"{where}: {os.fspath(path)!r} exists and overwrite=False; expected a new path, or pass "
                              f"overwrite=True")


def tmp_prefix(name):
    """Where a save of checkpoint ``name`` writes before its swap: ``.<name>.tmp-<pid>-<random>-<host>`` beside it."""
    return f".{name}.tmp-"


def _staged(directory):
    parent, name = os.path.split(directory)
    return os.path.join(parent, f".{name}.new")


def _aside(directory):
    parent, name = os.path.split(directory)
    return os.path.join(parent, f".{name}.old")


def _dead_temps(directory):
    """Temporary directories of saves of ``directory`` whose process no longer runs on this host."""
    parent, name = os.path.split(directory)
    pattern = re.compile(re.escape(tmp_prefix(name)) + r"(\d+)-[0-9a-f]{8}-(.+)")
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return []
    found = [pattern.fullmatch(n) for n in names]
    return [os.path.join(parent, m.group(0)) for m in found if m and m.group(2) == HOST and not _alive(int(m.group(1)))]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process
        return True
    return True


def remove(directory):
    """Delete checkpoint ``directory`` with what a killed save left beside it (only what saves made)."""
    directory = os.path.abspath(os.fspath(directory))
    if not os.path.isdir(os.path.dirname(directory)):
        return
    with _os_errors(directory, "removing it"), _Lock(directory, exclusive=True):
        for path in (_staged(directory), directory, _aside(directory)):
            if _examine(path).ours:
                _remove(path)
        for tmp in _dead_temps(directory):
            shutil.rmtree(tmp, ignore_errors=True)


def exists(directory):
    """Whether ``directory`` holds a checkpoint, or a killed save left one beside it (recovered when read)."""
    directory = os.path.abspath(os.fspath(directory))
    return any(os.path.lexists(os.path.join(path, MANIFEST)) for path in _candidates(directory))


def _candidates(directory):
    """Where checkpoint ``directory`` may be, newest first: a killed save's new one, itself, the one it was
    replacing, and ``<dir>.old`` (where saves of earlier versions put it)."""
    return _staged(directory), directory, _aside(directory), directory + ".old"


_held = set()       # lock files this process holds: a load inside a held lock does not try to recover


def _resolve(directory, temps=False):
    """The directory to read checkpoint ``directory`` from: what a killed save left is recovered first (under the
    lock; ``temps``: dead writers' temporary directories removed too) or, where that cannot be done (a read-only
    file system), the newest complete candidate is read in place."""
    target = os.path.abspath(directory)
    lock = _Lock(target, exclusive=True)
    pending = os.path.lexists(_staged(target)) or os.path.lexists(_aside(target)) or (temps and _dead_temps(target))
    if pending and lock.path not in _held:
        with contextlib.suppress(OSError), lock:
            _recover(target, saving=False)
    if os.path.lexists(os.path.join(target, MANIFEST)):
        return directory
    return next((path for path in _candidates(target) if _examine(path).complete), directory)


@contextlib.contextmanager
def _reading(directory):
    """Recover what a killed save left, then hold a shared lock while the checkpoint is read (a save of it waits)."""
    _resolve(os.fspath(directory), temps=True)
    lock = _Lock(os.path.abspath(os.fspath(directory)), exclusive=False)
    try:
        lock.__enter__()
    except OSError:         # nowhere to put a lock (a read-only or missing directory): nothing swaps it either
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)


class _Lock:
    """A ``flock`` of ``.<name>.lock`` beside checkpoint ``directory``: exclusive while a save swaps or a recovery
    repairs, shared while a load reads.  The last holder removes the file; a process that got the lock checks that
    the file it locked is still the one at that path (else its holder had removed it) and locks anew if not.  Waits
    LOCK_WAIT seconds at most, then a CheckpointError naming the holder."""

    def __init__(self, directory, exclusive):
        parent, name = os.path.split(directory)
        self.directory, self.exclusive, self.path = directory, exclusive, os.path.join(parent, f".{name}.lock")

    def __enter__(self):
        deadline, pause = time.monotonic() + LOCK_WAIT, 0.001
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                while not _flock(fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH):
                    if time.monotonic() > deadline:
                        raise CheckpointError(
                            f"checkpoint {self.directory!r}: expected to {'save' if self.exclusive else 'load'} it "
                            f"once the save or load of it under way is done, but {_holder(fd)} held its lock "
                            f"{self.path} for over {LOCK_WAIT} s; stop that process if it is stuck, or use another "
                            f"path")
                    time.sleep(pause)
                    pause = min(2 * pause, 0.05)
                if _same_file(fd, self.path):
                    if self.exclusive:
                        os.ftruncate(fd, 0)
                        os.write(fd, f"{os.getpid()} {HOST}\n".encode())
                    self.fd = fd
                    _held.add(self.path)
                    return self
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def __exit__(self, *exc):
        _held.discard(self.path)
        try:
            if self.exclusive or _flock(self.fd, fcntl.LOCK_EX):     # the last holder removes the file
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            os.close(self.fd)


def _flock(fd, mode):
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd, path):
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _holder(fd):
    text = os.pread(fd, 200, 0).decode(errors="replace").split()
    return f"process {text[0]} on host {text[1]}" if len(text) == 2 else "another process"


@contextlib.contextmanager
def _os_errors(directory, doing):
    """An OSError while ``doing`` something to checkpoint ``directory``: a CheckpointError saying so."""
    try:
        yield
    except OSError as e:
        raise CheckpointError(f"checkpoint {directory!r}: {doing} failed: {e}") from None


class _Damaged(Exception):
    """What is wrong with a file of a checkpoint (the message completes "file <path> ...")."""


def _kind(mode):
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _open_regular(name, dir_fd=None):
    """(fd, size) of ``name``, a regular file: a link is not followed, a FIFO or device never opened."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise _Damaged(f"expected a regular file, received {_kind(st.st_mode)} (a checkpoint's files are regular "
                       f"files inside it, and nothing else is opened)")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _Damaged("expected a regular file, received a symbolic link (made while it was opened)") from None
        raise
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise _Damaged("expected a regular file, received one replaced while it was opened")
    return fd, now.st_size


def _read_manifest(name, dir_fd=None):
    """A manifest, read (bounded, a regular file) and checked against its schema; raises FileNotFoundError, an
    OSError, or _Damaged saying what is wrong."""
    fd, size = _open_regular(name, dir_fd)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MANIFEST_LIMIT + 1) if size <= MANIFEST_LIMIT else b""
    if size > MANIFEST_LIMIT or len(data) > MANIFEST_LIMIT:
        raise _Damaged(f"expected at most {MANIFEST_LIMIT} bytes ({MANIFEST_LIMIT >> 20} MiB), received "
                       f"{max(size, len(data))}")
    try:
        manifest = json.loads(data)
    except RecursionError:
        raise _Damaged("is not valid JSON (nested too deeply)") from None
    except ValueError as e:
        raise _Damaged(f"is not valid JSON ({e})") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise _Damaged(problem)
    return manifest


def _manifest_problem(manifest):
    """What is wrong with a parsed manifest (None if nothing)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("variables"), dict) \
            or not isinstance(manifest.get("state", {}), dict):
        return f"expected a manifest with 'variables' and 'state', received {_brief(manifest)}"
    if manifest.get("format") != FORMAT:
        return f"expected format {FORMAT!r}, received {_brief(manifest.get('format'))}"
    files = set()
    for key, entry in manifest["variables"].items():
        if not _is_entry(entry):
            return f"entry {key!r} expected fields file/shape/dtype/sha256, received {_brief(entry)}"
        if _numpy_dtype(entry["dtype"]) is None:
            return f"entry {key!r} expected a dtype among {sorted(dtypes.ALL)} or numpy's numbers, received " \
                   f"{_brief(entry['dtype'])}"
        if entry["file"] in files:
            return f"entry {key!r} expected a file of its own, received {entry['file']!r}, another entry's too"
        files.add(entry["file"])
    return _state_problem(manifest.get("state", {}))


def _state_problem(state):
    optimizers = state.get("optimizers", {})
    if not isinstance(optimizers, dict) or not all(map(_is_optimizer_state, optimizers.values())):
        return f"state 'optimizers' expected owner -> fields class/slot_names/iterations, received {_brief(optimizers)}"
    rng = state.get("rng", {})
    if not isinstance(rng, dict) or not (rng.get("seed") is None or _is_int(rng["seed"])):
        return f"state 'rng' expected {{'seed': an int}}, received {_brief(rng)}"
    position = state.get("position")
    if position is not None and not _is_position(position):
        return f"state 'position' expected fields epoch/batch/metrics/steps/batch_size, received {_brief(position)}"
    if not isinstance(state.get("model", {}), dict):
        return f"state 'model' expected a model's description, received {_brief(state['model'])}"
    return None


DAMAGED_FIX = "restore the checkpoint from a copy or save it again"


class Reader:
    """One checkpoint on disk: its manifest read and checked, its arrays verified before any is assigned.

        reader = Reader("ckpt")
        reader.restore({"dense/kernel": kernel})     # checks all, then assigns each verified array

    What a killed save left beside the directory is recovered first (or, on a read-only file system, the newest
    complete checkpoint is read where it is).
    """

    def __init__(self, directory):
        self.directory = _resolve(os.fspath(directory))
        path = os.path.join(self.directory, MANIFEST)
        try:
            manifest = _read_manifest(path)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {self.directory!r}: expected a directory with {MANIFEST}, received "
                                  f"none (no checkpoint saved there)") from None
        except _Damaged as e:
            raise CheckpointError(f"checkpoint {self.directory!r} is damaged: file {path} {e}; {DAMAGED_FIX}") from None
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.directory!r}: reading {path} failed: {e}") from None
        self.entries = manifest["variables"]
        self.state = manifest.get("state", {})
        self.optimizers = self.state.get("optimizers", {})

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
                   or key in (f"{owner}/{s}" for s in saved.get("state_names", []))
                   for owner, saved in self.optimizers.items())

    def path(self, key):
        return os.path.join(self.directory, self.entries[key]["file"])

    def verify(self, keys, why="is damaged", fix=DAMAGED_FIX):
        """Every file of ``keys`` whole, read in chunks: a regular file inside the checkpoint whose ``.npy`` header
        says the manifest's shape and dtype, of exactly header + shape x dtype bytes, with the manifest's checksum."""
        for key in keys:
            with self._opened(key, why, fix) as (f, size):
                if size == self.entries[key].get("bytes", size):
                    head = f.read(min(size, HEADER_LIMIT))
                    self._layout(key, head, size, why, fix)
                else:
                    head = b""      # its size is wrong already: said with its checksum, as any damage
                self._check_file(key, *_digest(f, head, size), why, fix)

    def read(self, key, why="is damaged", fix=DAMAGED_FIX):
        """The array of ``key``, made from bytes read once (no more than the file holds) and checked against the
        manifest: their checksum, then their header's shape and dtype."""
        with self._opened(key, why, fix) as (f, size):
            data = bytearray(size)
            done = f.readinto(data)
            more = f.read(1)
        if done != size or more:    # it changed size while read
            self._check_file(key, done + len(more), hashlib.sha256(data[:done] + more).hexdigest(), why, fix)
        self._check_file(key, size, hashlib.sha256(data).hexdigest(), why, fix)
        dtype, shape, fortran, offset = self._layout(key, data, size, why, fix)
        value = np.frombuffer(data, dtype, count=math.prod(shape), offset=offset)
        value = value.reshape(shape, order="F" if fortran else "C")
        if value.dtype.kind == "V":     # numpy writes dtypes it does not know (bfloat16) as raw bytes
            value = value.view(_numpy_dtype(self.entries[key]["dtype"]))
        return value

    @contextlib.contextmanager
    def _opened(self, key, why, fix):
        """``key``'s file open for reading, and its size: a regular file (no link followed, no FIFO or device
        opened); a missing or special file, or a failed read, is a CheckpointError naming it."""
        path = self.path(key)
        try:
            fd, size = _open_regular(path)
        except FileNotFoundError:
            raise self._mismatch(key, None, None, why, fix) from None
        except _Damaged as e:
            raise CheckpointError(f"checkpoint {self.directory!r} {why}: file {path} (variable {key!r}) {e}; "
                                  f"{fix}") from None
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.directory!r} {why}: file {path} (variable {key!r}) could not be "
                                  f"opened: {e}; {fix}") from None
        try:
            with os.fdopen(fd, "rb") as f:
                yield f, size
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.directory!r} {why}: file {path} (variable {key!r}) could not be "
                                  f"read: {e}; {fix}") from None

    def _layout(self, key, data, size, why, fix):
        """(dtype, shape, fortran order, data offset) of ``key``'s file from the ``.npy`` header at the start of
        ``data``, once that header is found to say the manifest's shape and dtype and ``size`` to fit it exactly."""
        entry = self.entries[key]
        shape, expected = tuple(entry["shape"]), _numpy_dtype(entry["dtype"])
        head = io.BytesIO(bytes(data[:HEADER_LIMIT]))
        try:
            version = np.lib.format.read_magic(head)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"format version {version[0]}.{version[1]}, expected 1.0 or 2.0")
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            held, fortran, dtype = read(head, max_header_size=HEADER_LIMIT)
        except (ValueError, SyntaxError, TypeError, RecursionError) as e:
            problem = f"expected an .npy array file, received one whose header numpy cannot read ({e})"
        else:
            offset, itemsize = head.tell(), dtype.itemsize
            if dtype.hasobject:
                problem = "holds Python objects by its .npy header (dtype object), which are never loaded"
            elif held != shape or not _same_dtype(dtype, expected):
                problem = (f"holds shape {describe_shape(held)} and dtype {dtype} by its .npy header, expected the "
                           f"manifest's shape {describe_shape(shape)} and dtype {entry['dtype']}")
            elif size != offset + math.prod(shape) * itemsize:
                problem = (f"expected {offset + math.prod(shape) * itemsize} bytes (a header of {offset} and shape "
                           f"{describe_shape(shape)} of {itemsize}-byte {entry['dtype']}), received {size}")
            else:
                return dtype, shape, fortran, offset
        raise CheckpointError(f"checkpoint {self.directory!r} {why}: file {self.path(key)} (variable {key!r}) "
                              f"{problem}; {fix}")

    def _check_file(self, key, size, digest, why, fix):
        error = self._mismatch(key, size, digest, why, fix)
        if error is not None:
            raise error

    def _mismatch(self, key, size, digest, why, fix):
        """The CheckpointError of a file whose size or checksum is not the manifest's (None if both are)."""
        entry = self.entries[key]
        if digest == entry["sha256"] and size == entry.get("bytes", size):
            return None
        expected = (f"{entry['bytes']} bytes with " if "bytes" in entry else "") + f"sha256 {entry['sha256'][:12]}..."
        received = "no file (missing)" if digest is None else f"{size} bytes with sha256 {digest[:12]}..."
        return CheckpointError(f"checkpoint {self.directory!r} {why}: file {self.path(key)} (variable {key!r}) "
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
            and entry["file"] not in ("", ".", "..", MANIFEST) and "\x00" not in entry["file"]
            and os.path.basename(entry["file"]) == entry["file"]
            and isinstance(entry.get("shape"), list) and len(entry["shape"]) <= 64
            and all(_is_count(d) for d in entry["shape"])
            and isinstance(entry.get("dtype"), str) and isinstance(entry.get("sha256"), str)
            and re.fullmatch("[0-9a-f]{64}", entry["sha256"]) is not None and _is_count(entry.get("bytes", 0)))


def _is_optimizer_state(saved):
    return (isinstance(saved, dict) and isinstance(saved.get("class"), str)
            and isinstance(saved.get("slot_names"), list) and all(isinstance(s, str) for s in saved["slot_names"])
            and _is_count(saved.get("iterations")) and saved["iterations"] < 2 ** 63     # an int64 step counter
            and isinstance(saved.get("state_names", []), list) and all(isinstance(s, str) for s in
                                                                       saved.get("state_names", [])))


def _is_position(position):
    """``fit``'s position: the epoch, the batches done in it, their running metric sums, the data it ran on."""
    return (isinstance(position, dict) and _is_count(position.get("epoch")) and _is_count(position.get("batch"))
            and isinstance(position.get("metrics", []), list)
            and all(isinstance(m, list) and len(m) == 3 and isinstance(m[0], str) and all(map(_is_number, m[1:]))
                    for m in position.get("metrics", []))
            and all(position.get(k) is None or _is_count(position[k]) for k in ("steps", "batch_size")))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value):
    return _is_int(value) and value >= 0


def _is_number(value):
    return _is_int(value) or isinstance(value, float)


def _numpy_dtype(name):
    """The numpy dtype a manifest's dtype name stands for (flowlayers' dtypes and numpy's numbers); else None."""
    if name in dtypes.ALL:
        return np.dtype(dtypes.ALL[name].numpy)
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError):
        return None
    return dtype if dtype.kind in "biuf" and dtype.name == name else None


def _same_dtype(held, expected):
    """An .npy header's dtype is the manifest's, or raw records of its size for one numpy does not know."""
    return held == expected or (expected.kind == "V" and held.kind == "V" and held.names is None
                                and held.subdtype is None and held.itemsize == expected.itemsize)


def _digest(f, head, size):
    """(bytes, sha256) of ``head`` and the rest of open file ``f``, reading at most ``size`` + 1 bytes in all."""
    digest, count = hashlib.sha256(head), len(head)
    while count <= size:
        chunk = f.read(min(CHUNK, size + 1 - count))
        if not chunk:
            break
        digest.update(chunk)
        count += len(chunk)
    return count, digest.hexdigest()


def _brief(value):
    try:
        text = json.dumps(value) if isinstance(value, (dict, list)) else repr(value)
    except (RecursionError, ValueError):
        text = f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= 200 else text[:200] + "..."


def _takes(dtype, saved):
    """Whether a variable of ``dtype`` takes an array saved as ``saved``: a float one any float (cast)."""
    if saved == dtype.name:
        return True
    return dtype.is_floating and saved in dtypes.ALL and dtypes.ALL[saved].is_floating


# Training state ----------------------------------------------------------
# ``optimizers`` maps an owner (a model's optimizer name, or job name/optimizer name) to
# (optimizer, the variables it trains); a slot's key is "<owner>/<variable path>/<slot name>".

def state(optimizers, seed, position=None):
    """The manifest's state: each optimizer's kind and step counter, the random state (the global ``seed``; dropout
    is stateless in seed, op and step), fit's position."""
    out = {"optimizers": {owner: _optimizer_state(opt) for owner, (opt, _) in optimizers.items()},
           "rng": {"seed": seed}}
    if position is not None:
        out["position"] = position
    return out


def slot_variables(optimizers):
    """Checkpoint key -> slot Variable, for every optimizer (slots not made yet are made, as zeros), and its own
    state (a loss scale: ``<owner>/<name>``)."""
    slots = {f"{owner}/{var.path}/{name}": slot for owner, (opt, variables) in optimizers.items()
             for var in variables if var.trainable for name, slot in zip(opt.all_slot_names, opt.slots(var))}
    slots.update({f"{owner}/{name}": var for owner, (opt, _) in optimizers.items()
                  for name, var in opt.state_variables().items()})
    return slots


def restore(directory, weights, optimizers, extra_weights="refuse"):
    """Restore ``weights`` (key -> Variable) and the state of each optimizer saved by one of the same kind.

    A checkpoint holding weights beyond ``weights`` is refused (``extra_weights="refuse"``) or loaded with a
    warning naming them (``"warn"``).  Everything is verified before anything is written; returns the Reader
    (its ``state`` has the position).
    """
    with _reading(directory):
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
    with _reading(directory):
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
    saved = {"class": type(optimizer).__name__, "slot_names": list(optimizer.all_slot_names),
             "iterations": int(optimizer.iterations)}
    if optimizer.state_variables():
        saved["state_names"] = list(optimizer.state_variables())
    return saved


def _matching(saved_all, directory, owner, optimizer):
    """The saved state for ``owner`` if a same-kind optimizer wrote it; else None (with a warning if the
    checkpoint holds another optimizer's state, which is then left out, as Keras does)."""
    saved, mine = saved_all.get(owner), _optimizer_state(optimizer)
    if saved and saved["class"] == mine["class"] and saved["slot_names"] == mine["slot_names"] and \
            saved.get("state_names", []) == mine.get("state_names", []):
        return saved
    if saved_all:
        held = ", ".join(f"{o!r} ({s['class']})" for o, s in saved_all.items())
        warnings.warn(f"checkpoint {directory!r} holds the state of optimizer {held}; expected {owner!r} "
                      f"({mine['class']}), so the optimizer state is not restored (the weights are)", stacklevel=4)
    return None


_SCALAR = types.SimpleNamespace(shape=(), dtype=dtypes.float32)    # what an optimizer's own state is checked as


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
            keys.update({f"{owner}/{s}": _SCALAR for s in saved.get("state_names", [])})
            reader.check(keys)
            reader.verify(keys)     # a damaged checkpoint is refused by load_weights, not later by fit

    def apply(self, owner, optimizer, trainable):
        saved = _matching(self.reader.optimizers, self.reader.directory, owner, optimizer)
        if saved is None:
            return
        with _reading(self.reader.directory):
            self.reader.restore(slot_variables({owner: (optimizer, trainable)}),
                                why="changed or vanished since load_weights read it",
                                fix="nothing of the optimizer state was restored (the weights were); put the "
                                    "checkpoint back and train again, or call load_weights again now that the model "
                                    "is compiled")
        optimizer.iterations = saved["iterations"]


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
