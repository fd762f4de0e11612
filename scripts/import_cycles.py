"""List the import cycles of the `legato` package and the imports made inside functions.

    python scripts/import_cycles.py            # report; exit 1 if a cycle exists
    python scripts/import_cycles.py --lazy     # also list every import inside a function

The graph is grimp's (the one import-linter checks the layer contracts against): every
`import`/`from ... import` anywhere in a module, inside functions included, is an edge. A cycle is
a strongly connected component of more than one module; each is printed with the imports that
make it, as `importer -> imported (file:line)`, so the edge to move is easy to find.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one module, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    succ = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out, key=len, reverse=True)


def lazy_imports(package_dir: Path) -> list[tuple[str, int, str]]:
    """(file, line, statement) of every import statement inside a function body."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.append(
                        (str(path.relative_to(ROOT)), node.lineno, ast.unparse(node).strip())
                    )
    return sorted(set(found))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lazy", action="store_true", help="list imports inside functions")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("legato", cache_dir=None)
    cycles = strongly_connected(graph)
    for comp in cycles:
        members = set(comp)
        print(f"cycle of {len(comp)} modules: {', '.join(comp)}")
        for importer in comp:
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
                details = graph.get_import_details(importer=importer, imported=imported)
                where = ", ".join(str(d["line_number"]) for d in details)
                print(f"  {importer} -> {imported} (line {where})")
    lazy = lazy_imports(ROOT / "legato")
    if args.lazy:
        for file, line, stmt in lazy:
            print(f"{file}:{line}: {stmt}")
    print(f"{len(cycles)} import cycle(s); {len(lazy)} import(s) inside functions")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
