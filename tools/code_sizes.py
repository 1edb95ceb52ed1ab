"""Modules and functions over the developers' guide's sizes: modules over 500 lines, functions
(nested ones too) over 80 lines, in every .py file under the folders given.

    python3 tools/code_sizes.py [FOLDER ...]   (default: saberjax launch tools)

Prints one line a finding (MODULE path lines, FUNCTION path:line name lines) and exits 1 when
there is any, 0 when there is none.
"""

import ast
import pathlib
import sys

MODULE_LINES = 500
FUNCTION_LINES = 80


def findings(folder: pathlib.Path) -> list[str]:
    """The lines of every module and function under `folder` over the sizes."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MODULE_LINES:
            found.append(f"MODULE {path} {lines}")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"FUNCTION {path}:{node.lineno} {node.name} {length}")
    return found


def main(folders: list[str]) -> int:
    found = [line for folder in folders or ["saberjax", "launch", "tools"]
             for line in findings(pathlib.Path(folder))]
    print("\n".join(found) if found else "no module or function over the sizes")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
