"""The documentation site, built as CI builds it (``mkdocs build --strict``) and read as a browser gets it.

Every tutorial script has a page that shows it; the API reference names no private member, internal or
constant; code is coloured at build time; and no page loads a script, stylesheet or font from the network,
so the site reads the same offline.
"""
import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted(ROOT.glob("tutorials/[0-9][0-9]_*.py"))

# Members that are public Python but internal to flowlayers: the reference once listed them (issue 43)
INTERNALS = {"input_ndim", "min_ndim", "keep_kernel_and_bias", "kernel_and_bias_config", "fix_feature_dims",
             "train_function", "input_shape_arg", "accepts_training", "DAMAGED_FIX"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
EXTERNAL = re.compile(r"^\s*(https?:)?//", re.I)
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


class Page(HTMLParser):
    """What the tests read from one built page: headings, signatures, paragraphs, code, and what it loads."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.headings, self.signatures, self.paragraphs, self.code, self.loads = [], [], [], [], []
        self.blockquotes = 0
        self._open = []     # [tag, attrs, collected text] of the elements whose text is being collected
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.blockquotes += tag == "blockquote"
        if tag == "script" and attrs.get("src"):
            self.loads.append(("script", attrs["src"]))
        if tag == "link" and attrs.get("href") and set((attrs.get("rel") or "").split()) & {
                "stylesheet", "preload", "preconnect", "icon", "modulepreload", "dns-prefetch"}:
            self.loads.append((f"link rel={attrs['rel']}", attrs["href"]))
        if tag in {"img", "iframe", "source", "video", "audio"} and attrs.get("src"):
            self.loads.append((tag, attrs["src"]))
        classes = set((attrs.get("class") or "").split())
        kinds = [c[len("doc-symbol-"):] for c in classes if c.startswith("doc-symbol-") and c != "doc-symbol-heading"]
        if kinds and self._open and self._open[-1][0] in HEADINGS:
            self._open[-1][1]["kind"] = kinds[0]       # mkdocstrings marks an object's heading with its kind
        if tag in HEADINGS | {"p", "pre", "style"} or "doc-signature" in classes:
            self._open.append([tag, attrs, []])

    def handle_endtag(self, tag):
        if tag == "div" and self._open and "doc-signature" in (self._open[-1][1].get("class") or ""):
            self._close()
        elif self._open and self._open[-1][0] == tag:
            self._close()

    def handle_data(self, data):
        for element in self._open:
            element[2].append(data)

    def _close(self):
        tag, attrs, parts = self._open.pop()
        text = "".join(parts)
        if tag in HEADINGS:
            self.headings.append((attrs.get("id", ""), text.replace("¶", "").strip(), attrs.get("kind")))
        elif tag == "p":
            self.paragraphs.append(text)
        elif tag == "pre":
            self.code.append(text)
        elif tag == "style":
            self.loads += [("style url()", url) for url in css_urls(text)]
        else:
            self.signatures.append(text)


def css_urls(text):
    """The addresses a stylesheet fetches: ``url(...)`` and ``@import`` (data: URIs are not fetched)."""
    found = re.findall(r"url\(\s*['\"]?([^'\")]+)", text) + re.findall(r"@import\s+['\"]([^'\"]+)", text)
    return [u for u in found if not u.startswith("data:")]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "pymdownx"):
        pytest.importorskip(module, reason=f"the docs extra is not installed ({module} is missing): "
                                           f'pip install -e ".[docs]" to build the site')
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(out)], cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout[-3000:]}\n{build.stderr[-6000:]}"
    return out


@pytest.fixture(scope="module")
def built(site):
    """Every page of the site, read: {path from the site's root: Page}."""
    return {p.relative_to(site).as_posix(): Page(p.read_text(encoding="utf-8")) for p in sorted(site.rglob("*.html"))}


def under(built, folder):
    return {path: page for path, page in built.items() if path.startswith(folder + "/")}


def test_every_tutorial_script_has_a_page_that_shows_it(site, built):
    assert len(TUTORIALS) >= 9, [p.name for p in TUTORIALS]
    tutorials = under(built, "tutorials")
    listed = (site / "tutorials" / "index.html").read_text(encoding="utf-8")
    for script in TUTORIALS:
        number = script.name[:2]
        # tutorials/07-char-gpt.html, or tutorials/07-char-gpt/index.html where mkdocs makes directory URLs
        named = [path for path in tutorials if any(part.startswith(f"{number}-") for part in Path(path).parts)]
        assert named, f"{script.name}: no page tutorials/{number}-* among {sorted(tutorials)}"
        page_path = named[0]
        slug = next(part for part in Path(page_path).parts if part.startswith(f"{number}-"))
        first_lines = [line for line in script.read_text(encoding="utf-8").splitlines() if line.strip()][:6]
        shown = "\n".join(tutorials[page_path].code)
        missing = [line for line in first_lines if line not in shown]
        assert not missing, f"{page_path} does not show {script.name} (missing lines {missing})"
        assert f'{slug}"' in listed or f"{slug}/" in listed, f"{page_path} is not in the tutorials' navigation"


def test_api_reference_shows_public_names_only(built):
    found = []
    for path, page in under(built, "reference").items():
        for anchor, text, kind in page.headings:
            names = IDENTIFIER.findall(text) + (anchor.split(".") if kind else [])    # an object's anchor: its path
            for name in names:
                if name.startswith("_") or name in INTERNALS:
                    found.append(f"{path}: heading {text!r} (#{anchor}) names {name!r}")
            if kind == "attribute" and anchor.rsplit(".", 1)[-1].isupper():
                found.append(f"{path}: heading {text!r} (#{anchor}) is a constant")
        for signature in page.signatures:
            for name in IDENTIFIER.findall(signature):
                if name.startswith("_") or name in INTERNALS:
                    found.append(f"{path}: signature {signature.strip()!r} names {name!r}")
    assert not found, "the API reference shows private or internal names:\n" + "\n".join(found)
    assert ("flowlayers.models.Model.fit", "fit", "method") in built["reference/models.html"].headings


def test_search_finds_no_internals(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    hits = [doc["location"] for doc in index["docs"] if doc["location"].startswith("reference/")
            and (set(IDENTIFIER.findall(html.unescape(doc["title"]))) & INTERNALS
                 or "#" in doc["location"] and doc["location"].rsplit("#", 1)[1].split(".")[-1].startswith("_"))]
    assert not hits, f"the search index offers internals: {hits}"


def test_docstring_examples_are_code_not_prose(built):
    reference = under(built, "reference")
    # Markdown reads a bare '>>>' line as a paragraph, or as three nested quotes
    flattened = [f"{path}: {p.strip()[:80]!r}" for path, page in reference.items()
                 for p in page.paragraphs if p.lstrip().startswith(">>>")]
    flattened += [f"{path}: {page.blockquotes} blockquotes" for path, page in reference.items() if page.blockquotes]
    assert not flattened, "doctest examples rendered as prose:\n" + "\n".join(flattened)
    assert any(">>> x = flow.Input((1, 28, 28), batch_size=100)" in code
               for page in reference.values() for code in page.code), "flow.Input's example is not shown as code"


def test_code_is_highlighted_at_build_time(site):
    page = next(site.glob("tutorials/01-*.html"), None) or next(site.glob("tutorials/01-*/index.html"))
    page = page.read_text(encoding="utf-8")
    assert '<span class="kn">import</span>' in page, "no Pygments spans in the tutorial's code"
    assert "highlight.js" not in page and "hljs" not in page


def test_no_page_loads_anything_from_the_network(site, built):
    found = [f"{path}: {kind} {url}" for path, page in built.items() for kind, url in page.loads
             if EXTERNAL.match(url)]
    for css in sorted(site.rglob("*.css")):
        found += [f"{css.relative_to(site)}: url {u}" for u in css_urls(css.read_text(encoding="utf-8"))
                  if EXTERNAL.match(u)]
    assert not found, "assets fetched from the network:\n" + "\n".join(found)
