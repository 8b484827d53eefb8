"""The floors of the house: the files of ``flowlayers/`` import each other without a circle, no import of flowlayers
hides inside a function, and the contract is a leaf (it imports nothing of flowlayers but errors, sbp and dtypes).
Read from the source with ``ast``: what is imported is what the files say."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flowlayers"
LEAF_DEPENDENCIES = {"flowlayers.errors", "flowlayers.sbp", "flowlayers.dtypes"}


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(module, node):
    """The flowlayers modules an import statement names (a package's submodule where the name is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "flowlayers"]
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    if base.split(".")[0] != "flowlayers":
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports():
    """``{module: {imported module, ...}}`` for every import a file makes, wherever it stands, and the imports found
    inside functions."""
    graph, hidden = {}, []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        graph[module] = {m for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                         for m in _imported(module, node) if m != module}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)) and _imported(module, inner):
                        hidden.append(f"{path.relative_to(PACKAGE.parent)}:{inner.lineno} in {node.name}()")
    return graph, hidden


def _circles(graph):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_between_files_of_flowlayers():
    graph, _ = _imports()
    assert _circles(graph) == []


def test_no_import_of_flowlayers_hides_inside_a_function():
    _, hidden = _imports()
    assert hidden == []


def test_the_contract_is_a_leaf():
    graph, _ = _imports()
    assert graph["flowlayers.contract"] <= LEAF_DEPENDENCIES


def test_the_checks_see_a_circle_and_a_hidden_import():
    """The checks above can fail: a circle of two modules and an import inside a function are found."""
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    tree = ast.parse("def f():\n    from . import engine\n")
    assert _imported("flowlayers.config", tree.body[0].body[0]) == ["flowlayers.engine"]
