"""No code writes a project clause by hand: the tenant guard comes from `footfall.shared.sql.scope` only.

Every `.py` file under services/ and shared/ is parsed with `ast`, and every string
constant (the template of `sql(...)`, any other literal, the literal parts of an
f-string) that compares `project_id` (`project_id = …`, `!=`, `<`, `IN …`, `NOT IN …`,
`BETWEEN`, `equals(project_id, …)`, …) is reported with its file and line. Exempt:
`shared/sql/scope.py`, which writes the guard, the DDL and migrations in
`shared/schema/`, and documentation (docstrings and other bare string statements,
which are never sent to the warehouse). A report module that needs a project
condition takes it from `source(table, scope, binds)`.

Pure: no warehouse, no imports of the scanned code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared")
EXEMPT_FILES = {"shared/sql/scope.py"}  # writes the guard itself
EXEMPT_DIRS = ("shared/schema/",)  # DDL (catalog, CREATE/ALTER TABLE migrations)

# (file, exact literal text) -> why it may compare project_id by hand. Kept minimal, and
# each entry must still match a literal (a stale entry fails `test_allowlist_is_current`).
# Empty today: shared/metadata/store.py, the only code reading the global (non-tenant) tables
# `projects`, `project_credentials`, `service_accounts` and `service_account_projects`,
# reads whole tables (`max(project_id)`, `... FINAL WHERE deleted = 0`) and compares no
# project_id in SQL, so it needs no entry.
ALLOWED: dict[tuple[str, str], str] = {}

_COMPARISON = re.compile(
    r"\bproject_id\b\s*(?:==?|!=|<>|<=|>=|<|>)"  # project_id = {}, project_id != 0, …
    r"|\bproject_id\s+(?:NOT\s+)?IN\b"  # project_id IN …, project_id NOT IN … (SQL's capitals)
    r"|(?i:\bproject_id\s+(?:not\s+)?in\s*[(\[{])"  # project_id in (…) / in {p:Array(UInt64)} / in [..]
    r"|(?i:\bproject_id\s+(?:not\s+)?between\b)"
    r"|(?i:\b(?:equals|notEquals|less|greater|lessOrEquals|greaterOrEquals|in|notIn)\s*\(\s*project_id\b)",
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str
    in_sql: bool  # the template (first argument) of an `sql(...)` call

    def __str__(self) -> str:
        where = "sql() template" if self.in_sql else "string literal"
        return f"{self.path}:{self.line}: {where} compares project_id by hand: {self.text!r}"


def _documentation(tree: ast.AST) -> set[int]:
    """The ids of string constants that are statements on their own (docstrings and the like)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.add(id(node.value))
    return out


def _sql_templates(tree: ast.AST) -> set[int]:
    """The ids of the constants (or f-string parts) that are the first argument of a `sql(...)` call."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name != "sql":
            continue
        first = node.args[0]
        out |= {id(n) for n in ast.walk(first) if isinstance(n, ast.Constant)}
    return out


def findings(source: str, path: str) -> list[Finding]:
    """The hand-written project comparisons in one file's source text."""
    tree = ast.parse(source, filename=path)
    docs, templates = _documentation(tree), _sql_templates(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in docs:
            continue
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if not isinstance(value, str) or not _COMPARISON.search(value):
            continue
        out.append(Finding(path, node.lineno, value, id(node) in templates))
    return sorted(out, key=lambda f: (f.line, f.text))


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in EXEMPT_FILES or rel.startswith(EXEMPT_DIRS) or "/__pycache__/" in rel:
                continue
            files.append(path)
    return files


def _all_findings() -> list[Finding]:
    out = []
    for path in scanned_files():
        out += findings(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    return out


def test_no_module_writes_a_project_clause_by_hand() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    # The scan must see the code that builds queries, or it proves nothing.
    for expected in (
        "services/query/reports/segmentation.py",
        "services/query/reports/_common/scan.py",
        "services/query/reports/funnels/disjoint.py",
        "shared/saved/store.py",
        "shared/metadata/store.py",
    ):
        assert expected in files, f"{expected} not scanned"
    found = [f for f in _all_findings() if (f.path, f.text) not in ALLOWED]
    assert not found, (
        "project conditions written by hand (read tenant tables through footfall.shared.sql.scope.source):\n"
        + "\n".join(map(str, found))
    )


def test_allowlist_is_current() -> None:
    present = {(f.path, f.text) for f in _all_findings()}
    stale = [key for key in ALLOWED if key not in present]
    assert not stale, f"allowlist entries that match nothing any more (remove them): {stale}"


def test_scanner_reports_hand_written_guards() -> None:
    code = '''
"""Module docs may say project_id = {p0:UInt64}."""
from footfall.shared.sql import sql


def build(binds, pid, ids):
    """So may a docstring: WHERE project_id IN {}."""
    a = sql("SELECT count() FROM events WHERE project_id = {} AND time >= {}", binds, binds)
    b = f"SELECT * FROM events WHERE project_id IN ({ids})"
    c = "SELECT 1 FROM saved_funnels WHERE project_id!=0"
    d = sql("SELECT 1 FROM events WHERE equals(project_id, {})", binds)
    e = b"DELETE FROM events WHERE project_id BETWEEN 1 AND 2"
    f = sql("SELECT max(project_id) FROM projects FINAL ORDER BY project_id")
    g = "the project_id in the request does not match"
    h = {"project_id": pid}
    return a, b, c, d, e, f, g, h
'''
    found = findings(code, "example.py")
    assert [(f.line, f.in_sql) for f in found] == [(8, True), (9, False), (10, False), (11, True), (12, False)], found
