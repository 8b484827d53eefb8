"""The persistent compilation cache, one setting (``flow.config.set_compilation_cache(dir)`` or
``$FLOWLAYERS_COMPILATION_CACHE``): on the jax backend a second process running the same model loads every program
the first compiled, and compiles none; a backend that keeps no compiled programs (tensorflow) refuses it by name."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import flowlayers as flow


# a fresh process: fit, evaluate and predict a small model; count JAX's cache hits and misses
RUN = """
import json, sys
import numpy as np
import jax
events = {"hits": 0, "misses": 0}
def listen(event, **kwargs):
    if event.endswith("/compilation_cache/cache_hits"):
        events["hits"] += 1
    elif event.endswith("/compilation_cache/cache_misses"):
        events["misses"] += 1
jax.monitoring.register_event_listener(listen)
import flowlayers as flow
flow.config.gpu_device_num(2)
x = flow.Input((4,))
model = flow.Model(x, flow.layers.Dense(3)(flow.layers.Dense(8, activation="relu")(x)))
model.compile("adam", "mse")
data = np.ones((32, 4), np.float32)
model.fit(data, np.zeros((32, 3), np.float32), batch_size=8, epochs=1, verbose=0)
model.predict(data, verbose=0)
print(json.dumps({**events, "cache": flow.config.compilation_cache()}))
"""


def run(env):
    done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "FLOWLAYERS_BACKEND": "jax", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.jax_backend     # it keeps compiled programs on disk
def test_a_second_process_loads_every_program_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    first = run({"FLOWLAYERS_COMPILATION_CACHE": str(cache)})
    assert first["cache"] == str(cache) and first["misses"] > 0 and first["hits"] == 0
    assert len(os.listdir(cache)) >= first["misses"]
    second = run({"FLOWLAYERS_COMPILATION_CACHE": str(cache)})
    assert second["misses"] == 0 and second["hits"] == first["misses"]
    off = run({"FLOWLAYERS_COMPILATION_CACHE": ""})
    assert off == {"hits": 0, "misses": 0, "cache": None}


@pytest.mark.jax_backend     # it keeps compiled programs on disk
def test_the_setting_is_one_line_and_reaches_the_placement(tmp_path):
    flow.config.set_compilation_cache(tmp_path / "c")
    try:
        assert flow.config.compilation_cache() == str(tmp_path / "c")
        assert flow.engine.placement().compilation_cache == str(tmp_path / "c")
        flow.config.set_compilation_cache("")
        assert flow.config.compilation_cache() is None and flow.engine.placement().compilation_cache is None
    finally:
        flow.config.set_compilation_cache(None)
    with pytest.raises(flow.ConfigError, match=r"set_compilation_cache\(3\): expected a directory path, '' \(off\) "
                                               r"or None, received int"):
        flow.config.set_compilation_cache(3)


@pytest.mark.tensorflow_backend     # it keeps no compiled programs on disk
def test_a_backend_without_one_refuses_it_by_name(tmp_path, monkeypatch):
    with pytest.raises(flow.ConfigError, match=r"flow.config.set_compilation_cache\('.*'\): expected a backend that "
                                               r"keeps compiled programs on disk \(jax\), received backend "
                                               r"'tensorflow', which keeps none"):
        flow.config.set_compilation_cache(str(tmp_path))
    assert flow.config.compilation_cache() is None
    monkeypatch.setenv("FLOWLAYERS_COMPILATION_CACHE", str(tmp_path))     # the environment's way, refused where
    x = flow.Input((2,))                                                   # a step first runs
    model = flow.Model(x, flow.layers.Dense(1)(x))
    with pytest.raises(flow.ConfigError, match=r"compilation cache '.*' \(flow.config.set_compilation_cache or "
                                               r"\$FLOWLAYERS_COMPILATION_CACHE\): expected a backend that keeps"):
        model.predict(np.ones((2, 2), np.float32), verbose=0)
    monkeypatch.delenv("FLOWLAYERS_COMPILATION_CACHE")
    assert model.predict(np.ones((2, 2), np.float32), verbose=0).shape == (2, 1)
    assert not os.listdir(tmp_path)
