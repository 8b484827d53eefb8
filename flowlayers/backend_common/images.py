"""Image sampling's coordinates, for the augmentation kernels (``flowlayers/ops/augment.py``)."""


def into_image(xp, c, size, mode):
    """A sampling coordinate brought into [0, size - 1] by the fill mode, over a backend's namespace ``xp``
    (``zeros_like``, ``mod``, ``where``, ``floor``, ``clip``); ``"constant"`` leaves it as it is (the fill value
    is read where it falls outside)."""
    if mode == "constant":
        return c
    if size <= 1:
        return xp.zeros_like(c)
    if mode == "reflect":       # half-sample symmetric: period 2 * size, mirrored in its second half
        m = xp.mod(c, 2.0 * size)
        c = xp.where(m >= size, 2.0 * size - 1.0 - m, m)
    elif mode == "wrap":        # TF's: whole turns of size, counted in steps of size - 1
        c = xp.where(c < 0, c + size * (xp.floor(-c / (size - 1)) + 1.0),
                     xp.where(c > size - 1, c - size * xp.floor(c / (size - 1)), c))
    return xp.clip(c, 0.0, size - 1.0)
