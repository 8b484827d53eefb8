"""A griffe extension for the API reference: docstring examples become code blocks.

The docstrings are written for ``help()`` and doctest: examples are ``>>>`` lines, or an indented block after a
paragraph (after a line ending in ``::``, reStructuredText's literal block, or not).  Markdown reads the first as
a paragraph or as nested quotes, which runs the lines together into prose, and the docstring parser may take the
second apart.  This rewrites both as fenced blocks (``pycon`` for doctest lines, ``python`` for code that parses,
``text`` otherwise) before the docstring is parsed, so Pygments colours them; the source is not touched.
"""
import ast
import re

import griffe

_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def _indent(line):
    return len(line) - len(line.lstrip())


def _fenced(lines, language):
    return [f"```{language}", *lines, "```"]


def _language(block):
    """``pycon`` for a doctest session, ``python`` for code (a ``def`` line without its body counts), else text."""
    if block[0].lstrip().startswith(">>>"):
        return "pycon"
    source = "\n".join(block)
    for candidate in (source, source + "\n    pass"):
        try:
            ast.parse(candidate)
            return "python"
        except SyntaxError:
            pass
    return "text"


def _opens_indented_block(lines, i):
    """Whether line ``i`` is blank, ends a paragraph that is not a list item, and precedes a deeper indented line
    (Markdown's indented code block; after a list item it would be the item's next paragraph)."""
    if lines[i].strip() or i == 0 or not lines[i - 1].strip():
        return False
    start = i - 1
    while start > 0 and lines[start - 1].strip():
        start -= 1
    if _LIST_ITEM.match(lines[start]):
        return False
    j = i
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j < len(lines) and _indent(lines[j]) > _indent(lines[i - 1])


def _literal_block(lines, start, base):
    """The indented lines from ``start`` on (blank lines inside kept), dedented; and the index after them."""
    end, block = start, []
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
        block.append(lines[end])
        end += 1
    while block and not block[-1].strip():
        block.pop()
        end -= 1
    depth = min((_indent(line) for line in block if line.strip()), default=0)
    return [line[depth:] for line in block], end


def fence_examples(text):
    """``text`` with its doctest runs and ``::`` literal blocks fenced; text inside existing fences is kept."""
    lines, out, i, in_fence = text.split("\n"), [], 0, False
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence or _FENCE.match(line):
            out.append(line)
            i += 1
        elif line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            lead = line.rstrip()[:-2].rstrip()
            out.append(lead + ":" if lead.strip() else "")
            start = i + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            block, i = _literal_block(lines, start, _indent(line))
            if block:
                out += ["", *_fenced(block, _language(block)), ""]
        elif _opens_indented_block(lines, i):
            base = _indent(lines[i - 1])
            while i < len(lines) and not lines[i].strip():
                i += 1
            block, i = _literal_block(lines, i, base)
            out += ["", *_fenced(block, _language(block)), ""]
        elif line.lstrip().startswith(">>>"):
            base, block = _indent(line), []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][base:] if _indent(lines[i]) >= base else lines[i].lstrip())
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += _fenced(block, "pycon")
        else:
            out.append(line)
            i += 1
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the examples of every docstring mkdocstrings loads."""

    def on_instance(self, *, node, obj, agent, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = fence_examples(obj.docstring.value)
