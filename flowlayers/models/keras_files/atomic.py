"""One file written whole or not at all, the guarantee flowlayers' checkpoint directory gives, for the one-file
formats: the bytes go to ``.<name>.tmp-<pid>-<random>`` beside the file, are fsynced, and the temporary file is
renamed over it (then the directory is fsynced).  A kill at any point leaves the old file or the new one, never a
part; the temporary files of writers that no longer run are removed by the next write.

    with atomic.replacing("m.keras", "Model 'm'.save") as tmp:
        write(tmp)
"""
import contextlib
import os
import re
import secrets

from ...errors import CheckpointError


@contextlib.contextmanager
def replacing(path, where):
    """Yields the temporary path to write; once the block ends without an error it replaces ``path``."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    if os.path.isdir(path):
        raise CheckpointError(f"{where}: {path!r} is a directory, expected a file path for this format (flowlayers' "
                              f"checkpoint directory of an earlier save?); move it away, or save to a path without "
                              f"the .keras/.h5 extension to write a checkpoint directory")
    try:
        os.makedirs(parent, exist_ok=True)
        _remove_dead_temps(parent, name)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot write in {parent!r}: {e.strerror or e}") from None
    tmp = os.path.join(parent, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(parent)
    except OSError as e:
        raise CheckpointError(f"{where}: writing {path!r} failed: {e.strerror or e}; the file there (if any) is as "
                              f"it was; free space on that file system, or choose another path") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_dead_temps(parent, name):
    """Temporary files of earlier writes of ``name`` whose process no longer runs."""
    pattern = re.compile(re.escape(f".{name}.tmp-") + r"(\d+)-[0-9a-f]{8}")
    for entry in os.listdir(parent):
        found = pattern.fullmatch(entry)
        if found and not _alive(int(found.group(1))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(parent, entry))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
