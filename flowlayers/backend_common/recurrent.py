"""The recurrent cells' arithmetic (Keras' SimpleRNN, LSTM and GRU), over a backend's namespace."""


def rnn_inputs(attrs, rest):
    """(bias or None, given initial states (a tuple, maybe empty), mask or None): an ``rnn`` node's inputs after
    its two kernels, ``rest``, as its ``attrs`` lay them out (``flowlayers/ops/recurrent.py``)."""
    rest = list(rest)
    bias = rest.pop(0) if attrs["use_bias"] else None
    mask = rest.pop() if attrs["masked"] else None
    return bias, tuple(rest), mask


def rnn_cell(xp, attrs, recurrent, recurrent_bias, masks):
    """``step(states, projected input) -> (output, states)``: one time step of the cell ``attrs["cell"]`` (Keras'
    SimpleRNN, LSTM and GRU cells), written over a backend's namespace ``xp``: ``xp.activation(name)``,
    ``xp.project(x, weight, masks)`` (``x @ weight``, each gate's columns from ``x`` times that gate's dropout mask
    in ``masks``, None: none) and ``xp.gates(z, n)`` (``z``'s last dim cut in ``n`` equal parts)."""
    act, gate = xp.activation(attrs["activation"]), xp.activation(attrs["recurrent_activation"])
    units, project, gates = attrs["units"], xp.project, xp.gates

    def simple(states, xw):
        h = act(xw + project(states[0], recurrent, masks))
        return h, (h,)

    def lstm(states, xw):
        h, c = states
        i, f, g, o = gates(xw + project(h, recurrent, masks), 4)
        c = gate(f) * c + gate(i) * act(g)
        h = gate(o) * act(c)
        return h, (h, c)

    def gru(states, xw):
        (h,) = states
        x_z, x_r, x_h = gates(xw, 3)
        if attrs["reset_after"]:
            inner = project(h, recurrent, masks)
            inner = inner + recurrent_bias if recurrent_bias is not None else inner
            r_z, r_r, r_h = gates(inner, 3)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + r * r_h)
        else:
            r_z, r_r = gates(project(h, recurrent[:, :2 * units], None if masks is None else masks[:2]), 2)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + project(r * h, recurrent[:, 2 * units:], None if masks is None else masks[2:]))
        h = z * h + (1 - z) * candidate
        return h, (h,)

    return {"simple": simple, "lstm": lstm, "gru": gru}[attrs["cell"]]
