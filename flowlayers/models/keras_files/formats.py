"""Which file a path names, by its extension as Keras 3 reads it:

    ".keras"        Keras 3's zip (``archive.py``)
    ".weights.h5"   Keras 3's weights file (``weights.py``); ``model.save`` to it writes a legacy ``.h5``, as Keras
    ".h5", ".hdf5"  the legacy HDF5 full model (``legacy.py``)
    anything else   flowlayers' checkpoint directory (weights, optimizer state across views, model-parallel
                    shards: what Keras' files have no place for)
"""
import os

KERAS, WEIGHTS_H5, LEGACY_H5, DIRECTORY = "keras", "weights.h5", "h5", "directory"


def kind(filepath):
    path = os.fspath(filepath).lower()
    if path.endswith(".keras"):
        return KERAS
    if path.endswith(".weights.h5"):
        return WEIGHTS_H5
    if path.endswith((".h5", ".hdf5")):
        return LEGACY_H5
    return DIRECTORY
