"""The wheel a user installs: it carries the LICENSE, ``py.typed`` and the metadata a package index shows.

The wheel is built by pip (``pip wheel --no-deps``) from a copy of the project's sources, so the working tree
gets no ``build/`` folder, and without build isolation, so nothing is downloaded.
"""
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["setup.py", "pyproject.toml", "README.md", "LICENSE", "flowlayers", "backends"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    for module in ("setuptools", "wheel"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip cannot build the wheel without "
                                           f"build isolation")
    work = tmp_path_factory.mktemp("wheel")
    (work / "src").mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, work / "src" / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif (ROOT / name).exists():        # a missing LICENSE fails the tests below, not the build
            shutil.copy2(ROOT / name, work / "src" / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "--wheel-dir", str(work / "dist"), str(work / "src")], capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, f"pip wheel failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    (found,) = (work / "dist").glob("flowlayers-*.whl")
    return found


def metadata(archive):
    with zipfile.ZipFile(archive) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(z.read(name).decode("utf-8")), z.namelist()


def test_the_wheel_carries_the_license_and_py_typed(wheel):
    meta, names = metadata(wheel)
    licenses = [n for n in names if ".dist-info/" in n and Path(n).name == "LICENSE"]
    assert licenses, f"no LICENSE in the wheel: {sorted(n for n in names if '.dist-info/' in n)}"
    with zipfile.ZipFile(wheel) as z:
        assert z.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "flowlayers/py.typed" in names
    assert meta.get_all("License-File") == ["LICENSE"]


def test_the_metadata_names_license_urls_and_classifiers(wheel):
    meta, _ = metadata(wheel)
    assert "Apache-2.0" in (meta.get("License-Expression"), meta.get("License"))
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) >= {"Documentation", "Source", "Issues"}, urls
    assert all(u.startswith("https://") for u in urls.values()), urls
    classifiers = set(meta.get_all("Classifier") or [])
    expected = {"Development Status :: 3 - Alpha", "License :: OSI Approved :: Apache Software License",
                "Operating System :: OS Independent", "Topic :: Scientific/Engineering :: Artificial Intelligence",
                *(f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 14))}
    assert expected <= classifiers, sorted(expected - classifiers)
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Description-Content-Type"] == "text/markdown" and "# flowlayers" in meta.get_payload()
