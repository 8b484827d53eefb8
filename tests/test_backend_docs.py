"""``docs/backends.md`` is held to ``flowlayers/contract.py``: every name the contract exports, every member of its
protocols and every field of its data is on the page, and so is every name ``backend_common`` offers backends."""
import dataclasses
import re
import typing
from pathlib import Path

from flowlayers import backend_common, contract

PAGE = Path(__file__).resolve().parents[1] / "docs" / "backends.md"
PROTOCOLS = (contract.Backend, contract.Runtime, contract.Executable, contract.PendingReader, contract.KernelContext,
             contract.ArrayNamespace, contract.OptimizerRules, contract.Node, contract.Blob)
DATA = (contract.Capabilities, contract.Program, contract.VariableSpec, contract.Placement, contract.Cluster,
        contract.Rows, contract.Boxing, contract.Plan)


def _members(protocol):
    """What a protocol asks for: its methods and annotated attributes (not Protocol's own machinery)."""
    names = set(typing.get_type_hints(protocol, include_extras=False)) if protocol.__annotations__ else set()
    names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    names |= {"__call__"} & set(vars(protocol))
    return names


def _named(text):
    """Every name the page writes as code (in fenced blocks or between backticks), split at dots and calls."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S))
    return {part for code in fenced + inline for part in re.split(r"[^A-Za-z0-9_]+", code) if part}


def test_the_backend_page_names_everything_the_contract_holds():
    named = _named(PAGE.read_text())
    wanted = set(contract.__all__) | set(backend_common.__all__)
    wanted |= {m for p in PROTOCOLS for m in _members(p)}
    wanted |= {f.name for d in DATA for f in dataclasses.fields(d)}
    wanted |= {n for d in DATA for n, v in vars(d).items() if isinstance(v, property)}
    assert sorted(wanted - named) == []


def test_the_check_finds_what_a_page_leaves_out():
    assert "takes_rows" in _members(contract.Executable) and "capabilities" in _members(contract.Backend)
    assert "shows_program" not in _named("`Capabilities(several_steps=True)`")
