"""Each test starts as a fresh process does, where state of the process reaches results: tests compare a program
run in its own process (a SIGKILLed ``fit`` resumed) with the same program run in the test's process.

TensorFlow's global seed is such state: Keras' ``set_random_seed`` sets it, and a seeded ``tf.data`` shuffle then
draws another order (a test comparing with Keras once left it set, and a resumed ``fit`` on a shuffled dataset
then seemed to end 0.1 away from its uninterrupted run, which the later test ran in this process).
"""
import pytest

from conftest import reset_tensorflow_seed

pytestmark = pytest.mark.needs_tensorflow


def test_a_tensorflow_seed_an_earlier_test_set_is_unset_again():
    import tensorflow as tf

    def shuffled():
        return [int(i) for i in tf.data.Dataset.range(20).shuffle(20, seed=1).as_numpy_iterator()]

    assert tf.compat.v1.get_seed(None) == (None, None)     # the fixture left it unset, as a fresh process has it
    order = shuffled()
    tf.random.set_seed(3)                                   # as keras.utils.set_random_seed(3) does
    assert shuffled() != order
    reset_tensorflow_seed()                                 # what the fixture does before the next test
    assert tf.compat.v1.get_seed(None) == (None, None) and shuffled() == order
