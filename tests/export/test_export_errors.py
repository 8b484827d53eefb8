"""What ``model.export`` refuses, by name, before it writes anything (the model stays usable), what it prints, and
the endpoints it writes for other input signatures and for models of several inputs."""
import os
import subprocess
import sys

import numpy as np
import pytest

import flowlayers as flow


def dense():
    x = flow.Input((3,), name="features")
    return flow.Model(x, flow.layers.Dense(2)(x))


class Spec:
    """A spec as TensorFlow's and JAX's are read: a shape and a dtype."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


@pytest.mark.parametrize("format, words", [
    ("onnx", "format 'onnx' is one of Keras 3's that flowlayers does not write; expected one of "
             "['tf_saved_model', 'jax']"),
    ("saved_model", "format expected one of ['tf_saved_model', 'jax'], received 'saved_model'")])
def test_a_format_flowlayers_does_not_write_is_refused_by_name(tmp_path, format, words):
    model = dense()
    with pytest.raises(flow.ConfigError, match=r"Model '.*'\.export: " + words.replace("[", r"\[").replace(
            "]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        model.export(tmp_path / "out", format=format)
    assert not (tmp_path / "out").exists()
    assert model.predict(np.ones((2, 3), np.float32), verbose=0).shape == (2, 2)


@pytest.mark.parametrize("signature, words", [
    ([Spec((None, 4), "float32")], "input_signature for input 'features' expected shape (None, 3) (None: any "
                                   "size; a size may be fixed there) and dtype float32, received shape (None, 4) "
                                   "and dtype float32"),
    ([Spec((None, 3), "int32")], "expected shape (None, 3) (None: any size; a size may be fixed there) and dtype "
                                 "float32, received shape (None, 3) and dtype int32"),
    ([Spec((None, 3), "float32")] * 2, "input_signature expected one spec per model input (1: ['features']), "
                                       "received 2"),
    ([object()], "expected a spec with shape and dtype (tf.TensorSpec, jax.ShapeDtypeStruct, an array, "
                 "flow.Input), received object"),
    (Spec((None, 3), "float32"), "input_signature expected a list of the endpoint's arguments")])
def test_an_input_signature_that_does_not_fit_the_model_is_refused(tmp_path, signature, words):
    with pytest.raises(flow.InputError, match=r"export: .*" + words.replace("(", r"\(").replace(")", r"\)").replace(
            "[", r"\[").replace("]", r"\]")):
        dense().export(tmp_path / "out", input_signature=signature)
    assert not (tmp_path / "out").exists()


def test_other_mistakes_are_refused_by_name(tmp_path):
    model = dense()
    with pytest.raises(flow.InputError, match=r"verbose expected True, False or None, received 'yes'"):
        model.export(tmp_path / "out", verbose="yes")
    (tmp_path / "file").write_text("")
    with pytest.raises(flow.InputError, match=r"filepath expected a directory .* which is a file"):
        model.export(tmp_path / "file")
    with pytest.raises(flow.ConfigError, match=r"unexpected option\(s\) \['opset_version'\]"):
        model.export(tmp_path / "out", opset_version=17)
    with pytest.raises(flow.InputError, match=r"flow.export.load: expected a directory written by model.export"):
        flow.export.load(tmp_path)

    class Unbuilt(flow.Model):
        def call(self, x):
            return x

    with pytest.raises(flow.FlowLayersError, match=r"export"):
        Unbuilt().export(tmp_path / "out")


@pytest.mark.slow
def test_export_prints_the_endpoint_and_a_fixed_batch_signature_holds(tmp_path, capsys):
    model = dense()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    model.export(tmp_path / "fixed", input_signature=[Spec((4, 3), "float32")])
    printed = capsys.readouterr().out
    assert printed.startswith(f"Saved artifact at '{tmp_path / 'fixed'}' (format 'tf_saved_model', by ")
    assert printed.rstrip().endswith("Endpoint 'serve': (features: (4, 3) float32)")
    serve = flow.export.load(tmp_path / "fixed")
    np.testing.assert_allclose(serve(x), model.predict(x, verbose=0), atol=1e-6)
    with pytest.raises(Exception, match="(?i)shape|compatible|signature"):
        serve(x[:2])        # the batch was fixed at 4
    model.export(tmp_path / "quiet", verbose=False)
    assert capsys.readouterr().out == ""


@pytest.mark.slow
@pytest.mark.parametrize("format", ["tf_saved_model", "jax"])
def test_a_model_of_several_inputs_and_outputs_takes_and_returns_them_as_predict_does(tmp_path, format):
    a, b = flow.Input((3,), name="a"), flow.Input((2,), name="b")
    h = flow.layers.Concatenate()([a, b])
    model = flow.Model({"a": a, "b": b}, {"sum": flow.layers.Dense(1)(h), "logits": flow.layers.Dense(4)(h)})
    feeds = {"a": np.ones((5, 3), np.float32), "b": np.full((5, 2), 2.0, np.float32)}
    want = model.predict(feeds, verbose=0)
    model.export(tmp_path / "m", format=format, verbose=False)
    got = flow.export.load(tmp_path / "m")(feeds)
    assert sorted(got) == ["logits", "sum"]
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-6)


def hidden(engine, code):
    """Run ``code`` in a fresh process where ``engine`` is not installed (``import`` fails, ``find_spec`` finds
    nothing), on this backend; return its stdout."""
    script = f"import sys\nsys.modules[{engine!r}] = None\nimport flowlayers as flow\n{code}"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, FLOWLAYERS_CPU_DEVICES="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


REFUSED = """
x = flow.Input((3,))
model = flow.Model(x, flow.layers.Dense(2)(x))
try:
    model.export({path!r}, format={format!r})
except flow.ConfigError as e:
    print(e)
print(model.predict(__import__("numpy").ones((2, 3), "float32"), verbose=0).shape)
"""


@pytest.mark.slow
def test_a_format_whose_engine_is_not_installed_is_refused_by_name(tmp_path):
    if flow.config.backend_name() == "jax":
        out = hidden("tensorflow", REFUSED.format(path=str(tmp_path / "m"), format="tf_saved_model"))
        assert "on the jax backend: expected TensorFlow installed (the model is converted by jax2tf), received " \
               "none" in out
    else:
        out = hidden("jax", REFUSED.format(path=str(tmp_path / "m"), format="jax"))
        assert "format 'jax' is written by the backend(s) ['jax'], expected one with its engine installed, " \
               "received none" in out
    assert out.rstrip().endswith("(2, 2)")      # the model still predicts
    assert not (tmp_path / "m").exists()
