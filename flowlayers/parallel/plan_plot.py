"""``plan.plot(to_file)``: a picture of a parallel plan — the device mesh, and for each variable its logical shape
cut into the blocks the devices hold (taken from the plan's SBPs and the shard shapes the engine reported).
Drawn with matplotlib (without pyplot: no global state is touched); without matplotlib, a ``flow.ConfigError``
says to install it."""
import importlib
import math
import os

import numpy as np

from ..errors import ConfigError
from ..sbp import Split, format_nd


def plot(plan, to_file, variables=None, dpi=100):
    """Draw ``plan`` into ``to_file`` (its extension is the image format) and return ``to_file``.
    ``variables``: the paths to draw (default: every variable of the plan, optimizer slots included)."""
    figure_mod = _matplotlib("matplotlib.figure")
    colormaps = _matplotlib("matplotlib").colormaps
    patches = _matplotlib("matplotlib.patches")
    names = list(plan.variables) if variables is None else list(variables)
    unknown = [n for n in names if n not in plan.variables]
    if unknown:
        raise ConfigError(f"ParallelPlan.plot: variables {unknown} are not in the plan; expected paths among "
                          f"{list(plan.variables)}")
    colors = colormaps["tab10"].colors
    ncols = 3
    nrows = -(-(1 + len(names)) // ncols)
    fig = figure_mod.Figure(figsize=(3.4 * ncols, 2.9 * nrows))
    panels = np.asarray(fig.subplots(nrows, ncols)).ravel()
    for unused in panels[1 + len(names):]:
        unused.axis("off")
    devices = _device_coords(plan.axes)
    _draw_mesh(panels[0], plan.axes, devices, colors, patches.Rectangle)
    for panel, name in zip(panels[1:], names):
        _draw_variable(panel, name, plan.variables[name], plan.axes, devices, colors, patches.Rectangle)
    fig.suptitle(f"Held per device (with optimizer state): {plan.bytes_per_device:,} of {plan.logical_bytes:,} "
                 f"bytes; Boxing per step: {plan.comm_bytes_per_step:,.0f} bytes per device", fontsize=10)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(str(to_file)))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(str(to_file), dpi=dpi)
    return to_file


def _matplotlib(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError("ParallelPlan.plot: expected matplotlib to draw the plan, found none installed; install "
                          "it with `pip install matplotlib`, or print(plan) for the same facts as a table") from None


def _device_coords(axes):
    """[(device index, {mesh axis: coordinate})] in row-major mesh order."""
    sizes = [n for _, n in axes] or [1]
    names = [a for a, _ in axes]
    return [(i, dict(zip(names, (int(c) for c in np.unravel_index(i, sizes))))) for i in range(math.prod(sizes))]


def _grid_position(axes, coords):
    """A device's (row, column) in the mesh picture: rows along the first axis, columns along the others."""
    if len(axes) < 2:
        return 0, coords[axes[0][0]] if axes else 0
    rest = [n for _, n in axes[1:]]
    return coords[axes[0][0]], int(np.ravel_multi_index([coords[a] for a, _ in axes[1:]], rest))


def _draw_mesh(panel, axes, devices, colors, rectangle):
    """The mesh: device i at its coordinates, each in its own colour."""
    rows = axes[0][1] if len(axes) >= 2 else 1
    cols = math.prod(n for _, n in axes[1:]) if len(axes) >= 2 else (axes[0][1] if axes else 1)
    for i, coords in devices:
        r, c = _grid_position(axes, coords)
        panel.add_patch(rectangle((c, rows - 1 - r), 0.9, 0.9, color=colors[i % len(colors)], alpha=0.8))
        label = "\n".join(f"{a}={coords[a]}" for a, _ in axes)
        panel.text(c + 0.45, rows - 1 - r + 0.45, f"device {i}\n{label}", ha="center", va="center", fontsize=8)
    panel.set(xlim=(-0.1, cols), ylim=(-0.1, rows), title=f"mesh {' x '.join(f'{a}={n}' for a, n in axes)}")
    panel.set_xlabel(f"{' x '.join(a for a, _ in axes[1:]) or (axes[0][0] if axes else '')} axis")
    panel.set_ylabel(f"{axes[0][0]} axis" if len(axes) >= 2 else "")
    panel.set_xticks([])
    panel.set_yticks([])


def _block_of(sbp, axes, coords, rank):
    """The block (one index per tensor dim) a device at ``coords`` holds under nd-SBP ``sbp``: along a dim split
    over several axes, the blocks are numbered row-major over those axes."""
    block = [0] * rank
    for (axis, size), s in zip(axes, sbp):
        if isinstance(s, Split):
            block[s.axis] = block[s.axis] * size + coords[axis]
    return tuple(block)


def _draw_variable(panel, name, v, axes, devices, colors, rectangle):
    """One variable as a matrix (its leading dims by its last), cut into the blocks the devices hold; a block
    every device holds is grey."""
    rank = len(v.logical_shape)
    shape = tuple(v.logical_shape) if rank >= 2 else (1,) + tuple(v.logical_shape or (1,))
    height, width = math.prod(shape[:-1]), shape[-1]
    counts = [d // s if s else 1 for d, s in zip(v.logical_shape, v.shard_shape)] or [1]
    holders = {}
    for i, coords in devices:
        holders.setdefault(_block_of(v.sbp, axes, coords, rank), []).append(i)
    n_rows = math.prod(counts[:-1]) if rank >= 2 else 1
    n_cols = counts[-1]
    for block, held_by in holders.items():
        r = int(np.ravel_multi_index(block[:-1], counts[:-1])) if rank >= 2 else 0
        c = block[-1] if rank else 0
        x0, y0 = c * width / n_cols, height - (r + 1) * height / n_rows
        everyone = len(held_by) == len(devices)
        panel.add_patch(rectangle((x0, y0), width / n_cols, height / n_rows, edgecolor="black", alpha=0.6,
                                  facecolor="lightgrey" if everyone else colors[held_by[0] % len(colors)]))
        text = "all devices" if everyone else "devices " + ", ".join(map(str, held_by))
        panel.text(x0 + width / n_cols / 2, y0 + height / n_rows / 2, text, ha="center", va="center", fontsize=8)
    panel.set(xlim=(0, width), ylim=(0, height), title=f"{name} {tuple(v.logical_shape)}\nsbp {format_nd(v.sbp)}")
    panel.set_xlabel(f"each holder has {tuple(v.shard_shape)}", fontsize=8)
    panel.set_xticks([])
    panel.set_yticks([])
