"""Keras 3's files, written and read by flowlayers: ``.keras`` (``archive.py``), ``.weights.h5`` (``weights.py``)
and the legacy ``.h5`` full model (``legacy.py``).  ``formats.kind`` says which one a path names; a path of none of
them is flowlayers' checkpoint directory (``framework/checkpoint_format.py``), which holds what Keras' files have no
place for.  This package imports nothing itself: ``models/model.py`` imports its writers, ``models/loading.py`` its
readers (which make models)."""
