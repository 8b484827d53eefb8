"""tools/mutation.py names every module it plants bugs in and the tests that must notice them: each of those paths
exists, and each named mutant's line is still in its module (a moved or renamed file would otherwise end a run
with FileNotFoundError after its clean runs, or leave a named bug unplanted)."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mutation_tool", REPO / "tools" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


@pytest.mark.parametrize("module", sorted(mutation.TARGETS))
def test_each_target_module_and_its_tests_exist(module):
    assert (REPO / module).is_file(), f"{module}: a mutation target that is not a file of the tree"
    for test in mutation.TARGETS[module]:
        assert (REPO / test.split("::")[0]).exists(), f"{module}: its test {test!r} does not exist"


@pytest.mark.parametrize("module, old", [(m[0], m[1]) for m in mutation.NAMED])
def test_each_named_mutant_is_still_plantable(module, old):
    source = (REPO / module).read_text()
    assert source.count(old) == 1, f"{module}: the named mutant's line {old!r} is there {source.count(old)} times"
