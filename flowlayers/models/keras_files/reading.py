"""``flow.models.load_model`` of a Keras file: the model made from its config (``from_keras.py``), compiled as
saved (``compile=False``: not compiled), its weights and, where compiled, its optimizer state checked and assigned.
Nothing from the file runs."""
from ...errors import CheckpointError
from . import archive, from_keras, hdf5, legacy, training_config, weights


def load_keras(filepath, custom_objects, compile, where):  # noqa: A002 - Keras' name
    """The model of a ``.keras`` file."""
    config, packed = archive.members(filepath, where)
    model = from_keras.build(config, custom_objects, where)
    if compile and config.get("compile_config"):
        model.compile(**training_config.compile_arguments(config["compile_config"], custom_objects, where))
    with hdf5.reading(packed, where) as f:
        weights.read(f, model, where, optimizer=compile)
    return model


def load_legacy(filepath, custom_objects, compile, where):  # noqa: A002
    """The model of a legacy ``.h5`` file (Keras 2's or Keras 3's ``model.save("m.h5")``)."""
    with hdf5.reading(filepath, where) as f:
        config = hdf5.json_attribute(f, "model_config", where)
        if config is None:
            raise CheckpointError(f"{where}: expected a whole model saved by model.save (an HDF5 file with a "
                                  f"model_config), received one without it (weights only?); build the model in code "
                                  f"and call load_weights")
        model = from_keras.build(config, custom_objects, where)
        training = hdf5.json_attribute(f, "training_config", where) if compile else None
        if training:
            model.compile(**training_config.compile_arguments(training, custom_objects, where))
        legacy.read(f, model, where)
    return model
