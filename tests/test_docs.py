"""Everything a user can name is documented in README.md or docs/*.md (STYLE §9).

Each list is enumerated from the code, never written down here, so that adding a
command, an option, a SQL function, a macro, an error class or a spec key without
documenting it fails this test:

* CLI commands and their options, from ``dpsql.cli.build_parser()``;
* Python UDFs, from the functions ``dpsql.duck.register`` adds to a real connection;
* SQL macros, from the ``CREATE … MACRO`` statements of ``udfs/*.sql``;
* the planner's pseudo-functions, from ``dpsql.planner.classify_calls``;
* error classes, from ``dpsql.errors``;
* spec keys, from the key sets that ``dpsql/spec.py`` validates against.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
from pathlib import Path

import duckdb
import pytest

import dpsql.errors
from dpsql import duck
from dpsql.cli import build_parser

classify_calls = importlib.import_module("dpsql.planner.classify_calls")

ROOT = Path(__file__).resolve().parents[1]


def docs_text() -> str:
    return "\n".join(p.read_text() for p in [ROOT / "README.md",
                                              *sorted((ROOT / "docs").glob("*.md"))])


def documented(name: str, text: str) -> bool:
    """``name`` appears as code: `name`, `name(` or `dpsql name` (a whole word)."""
    return re.search(rf"(`|dpsql ){re.escape(name)}\b", text) is not None


def cli_commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_docs_exist():
    for name in ("sql.md", "cli.md", "errors.md", "spec.md"):
        assert (ROOT / "docs" / name).is_file(), name


def test_every_cli_command_is_documented():
    text = docs_text()
    commands = cli_commands()
    assert {"release", "inspect", "query", "demo"} <= set(commands)
    missing = [c for c in commands if f"dpsql {c}" not in text]
    assert not missing, f"CLI commands without docs: {missing}"


@pytest.mark.parametrize("command", sorted(cli_commands()))
def test_every_cli_option_is_documented_in_cli_md(command):
    """Each option of each command is in docs/cli.md's section for that command."""
    cli_md = (ROOT / "docs" / "cli.md").read_text()
    match = re.search(rf"^## `dpsql {command}`\n(.*?)(?=^## |\Z)", cli_md, re.S | re.M)
    assert match, f"docs/cli.md has no section '## `dpsql {command}`'"
    section = match.group(1)
    for action in cli_commands()[command]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = action.option_strings or [action.dest.upper()]
        assert any(f"`{n}`" in section or f"`{n} " in section for n in names), \
            f"dpsql {command}: option {names} is not documented in docs/cli.md"


def registered_udfs() -> set[str]:
    before = duckdb.connect()
    base = {r[0] for r in before.execute("SELECT function_name FROM duckdb_functions()"
                                         ).fetchall()}
    con = duckdb.connect()
    duck.register(con)
    after = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions()"
                                       ).fetchall()}
    return after - base


def macro_names() -> set[str]:
    pattern = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?MACRO\s+"
                         r"(\w+)", re.I)
    return {m for f in (ROOT / "udfs").glob("*.sql") for m in pattern.findall(f.read_text())}


def test_udfs_macros_and_sql_functions_are_documented():
    udfs, macros = registered_udfs(), macro_names()
    pseudo = set(classify_calls.ERROR_FUNCTIONS) | set(classify_calls.QUANTILE_FUNCTIONS) \
        | set(classify_calls.QUANTILE_CI_FUNCTIONS)
    assert {"dp_error", "dp_hist_quantile"} <= udfs
    assert "dp_level" in macros and "dp_stderr" in pseudo
    text = docs_text()
    missing = sorted(n for n in udfs | macros | pseudo if not documented(n, text))
    assert not missing, f"SQL functions without docs: {missing}"


def error_classes() -> list[str]:
    return [name for name, obj in vars(dpsql.errors).items()
            if inspect.isclass(obj) and issubclass(obj, BaseException)
            and obj.__module__ == dpsql.errors.__name__]


def test_every_error_class_is_documented_in_errors_md():
    names = error_classes()
    assert {"Error", "UnsupportedQueryError", "SpecError"} <= set(names)
    errors_md = (ROOT / "docs" / "errors.md").read_text()
    missing = [n for n in names if f"| `{n}` |" not in errors_md]
    assert not missing, f"error classes without a row in docs/errors.md: {missing}"


def spec_keys() -> set[str]:
    """Every key that spec.py and spec_attributes.py accept: the string sets they
    validate against (the ``known`` top-level keys, each ``_only(path, raw, {...})`` and
    the unit and budget key sets)."""
    keys: set[str] = set()
    for node in (n for module in ("spec.py", "spec_attributes.py")
                 for n in ast.walk(ast.parse((ROOT / "dpsql" / module).read_text()))):
        if isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) and
                                              isinstance(e.value, str) for e in node.elts):
            keys |= {e.value for e in node.elts}
    return keys


def test_every_spec_key_is_documented_in_spec_md():
    keys = spec_keys()
    assert {"neighbouring", "spine_file", "on_out_of_bounds", "max_rows", "rho"} <= keys
    spec_md = (ROOT / "docs" / "spec.md").read_text()
    missing = sorted(k for k in keys if f"`{k}" not in spec_md)
    assert not missing, f"spec keys without docs: {missing}"


def test_the_enumerations_would_catch_an_undocumented_name():
    """The checks are not vacuous: a made-up name is reported missing."""
    assert not documented("dp_no_such_function", docs_text())
    assert documented("dp_range", docs_text())


def test_relative_links_in_readme_and_docs_resolve():
    for page in [ROOT / "README.md", ROOT / "examples" / "README.md",
                 *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_every_dp_info_field_is_documented(trips_release):
    """Each key of a real query's ``cursor.dp_info`` (and of one ``references`` entry) is
    named in the ``cursor.dp_info`` section of docs/sql.md (which printed its list twice
    and left ``read_table``, ``budget`` and others out)."""
    import warnings

    import dpsql

    text = (ROOT / "docs" / "sql.md").read_text()
    section = text.split("## `cursor.dp_info`", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cur = dpsql.connect(trips_release).cursor()
    cur.execute("SELECT mode, COUNT(*) FROM trips WHERE distance < 40 GROUP BY mode")
    keys = set(cur.dp_info) | set(cur.dp_info["references"][0])
    assert keys - named == set(), f"dp_info fields not in docs/sql.md: {keys - named}"
