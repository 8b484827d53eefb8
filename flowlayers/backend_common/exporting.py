"""What an exported endpoint takes and returns: nests of inputs and outputs, and tensor names."""


def leaves(tree):
    """The leaves of a nest of lists, tuples and dicts, in the order TensorFlow's and JAX's trees flatten it (a dict
    by its sorted keys)."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]


def nested(structure, values):
    """``structure`` (a nest whose leaves are indices) with each index replaced by ``values[index]``: what an
    exported endpoint returns (``ExportSpec.outputs``)."""
    if isinstance(structure, dict):
        return {key: nested(item, values) for key, item in structure.items()}
    if isinstance(structure, (list, tuple)):
        return [nested(item, values) for item in structure]
    return values[structure]


def exported_inputs(spec, arguments):
    """The program's inputs, in order, from an exported endpoint's ``arguments`` (nested as
    ``ExportSpec.arguments``)."""
    inputs = [None] * len(spec.inputs)
    for index, value in zip(leaves(list(spec.arguments)), leaves(list(arguments))):
        inputs[index] = value
    return inputs


def tensor_name(name):
    """An input's name as TensorFlow takes it for a tensor in an exported signature (letters, digits, ``_.-/``; a
    letter first)."""
    cleaned = "".join(c if c.isalnum() or c in "_.-/" else "_" for c in name)
    return cleaned if cleaned[:1].isalpha() else f"input_{cleaned}"
