"""Record the BI replay fixtures of the clients installed here (run by hand, not by pytest).

``python tests/bi/record_fixtures.py RELEASE PGCLI`` serves RELEASE (a trips release,
e.g. the one tests/conftest.py builds) in this process, records every statement a client
sends exactly as it arrives (``Session.execute_sql`` wrapped: the raw text and the bound
parameters, before any routing or rewriting), and writes one fixture per client under
tests/bi/fixtures/:

* ``psql.json``: psql's meta-commands (``\\dt``, ``\\d trips``, ``\\l``, ``\\dn``, ``\\dv``,
  ``\\df``, ``\\d+ trips``) and its tab completion (``SELECT * FROM tr<TAB>``, ``\\d
  <TAB>``, ``SELECT COUNT(*) FROM trips WHERE mo<TAB>``, ``\\d geo<TAB>``), typed into a
  real psql under tmux;
* ``pgcli.json``: pgcli's start-up completion refresh and ``\\dt``/``\\d trips``, from the
  pgcli executable PGCLI;
* ``sqlalchemy_pandas.json``: SQLAlchemy's ``postgresql+psycopg`` inspector (what Superset
  calls to list schemas, tables and columns) and ``pandas.read_sql``.

Fixtures of clients that cannot run here (Superset's chart SQL, Metabase, Grafana,
DBeaver/pgjdbc) are written by hand from their public source; each says where from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent / "fixtures"


def _record(server, run) -> list[dict]:  # noqa: ANN001
    from dpsql.server._session import Session

    seen: list[dict] = []
    original = Session.execute_sql

    def wrapped(self, sql, params=None):  # noqa: ANN001, ANN202
        seen.append({"sql": sql, "params": [p if isinstance(p, (int, float, list))
                                            or p is None else str(p) for p in params]
                     if params else None})
        return original(self, sql, params)

    Session.execute_sql = wrapped
    try:
        run()
    finally:
        Session.execute_sql = original
    out, keys = [], set()
    for s in seen:  # each distinct statement once, in order
        key = (s["sql"], json.dumps(s["params"]))
        if key not in keys and s["sql"].strip():
            keys.add(key)
            out.append(s)
    return out


def _write(name: str, client: str, version: str, source: str, statements: list) -> None:
    HERE.mkdir(exist_ok=True)
    (HERE / f"{name}.json").write_text(json.dumps(
        {"client": client, "version": version, "source": source,
         "statements": statements}, indent=1) + "\n")
    print(f"{name}: {len(statements)} statements")


def main(release: str, pgcli: str) -> None:
    from dpsql.server import serve

    srv = serve(release, port=0)
    dsn = f"host=127.0.0.1 port={srv.port} dbname={srv.database} user=analyst"
    try:
        def psql() -> None:
            for cmd in (r"\dt", r"\dt+", r"\d", r"\d trips", r"\d+ trips", r"\d dist", r"\l",
                        r"\dn", r"\dn+", r"\dv", r"\di", r"\ds", r"\dm", r"\df dp*", r"\dT",
                        r"\du", r"\dx", r"\dp", r"\dconfig", r"\conninfo",
                        "SELECT mode, COUNT(*) FROM trips GROUP BY mode",
                        "SELECT region, COUNT(*) AS n, dp_ci_low(0.95), dp_ci_high(0.95) FROM "
                        "trips GROUP BY region ORDER BY region"):
                subprocess.run(["psql", dsn, "-E", "-c", cmd], capture_output=True,
                               timeout=60)
            session = "dpsql-record"
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y",
                            "50", f"psql '{dsn}'"], check=True)
            try:
                time.sleep(2)
                for keys in ("SELECT * FROM tr\t\t", "\x03", "\\d \t\t", "\x03",
                             "SELECT mo\t\t", "\x03", "SELECT * FROM public.\t\t", "\x03",
                             "SELECT COUNT(*) FROM trips WHERE mo\t\t", "\x03",
                             "\\d geo\t\t", "\x03"):
                    subprocess.run(["tmux", "send-keys", "-t", session, keys])
                    time.sleep(1.5)
            finally:
                subprocess.run(["tmux", "kill-session", "-t", session])

        version = " ".join(subprocess.run(["psql", "--version"], capture_output=True,
                                          text=True).stdout.split()[2:])  # 15.18 (Debian ...)
        _write("psql", "psql", version,
               "recorded for real: psql -E meta-commands and tab completion typed under "
               "tmux against dpsql serve (tests/bi/record_fixtures.py)", _record(srv, psql))

        def pgcli_run() -> None:
            # interactive, under tmux: only then does its completion refresher run in full
            session = "dpsql-record-pgcli"
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y",
                            "50", f"{pgcli} '{dsn}'"], check=True)
            try:
                time.sleep(8)  # start-up and the refresher's queries
                for line in ("\\dt", "\\d trips", "\\l", "\\dn", "\\dv", "\\di", "\\df",
                             "\\dT", "\\du",
                             "SELECT mode, COUNT(*) FROM trips GROUP BY mode"):
                    subprocess.run(["tmux", "send-keys", "-t", session, line, "Enter"])
                    time.sleep(1.5)
            finally:
                subprocess.run(["tmux", "kill-session", "-t", session])

        version = subprocess.run([pgcli, "--version"], capture_output=True,
                                 text=True).stdout.split()[-1]
        _write("pgcli", "pgcli", version,
               "recorded for real: pgcli (pip install pgcli) start-up under tmux, its completion "
               "refresh, \\dt, \\d trips, \\l, \\dn, \\dv, \\di, \\df, \\dT, \\du and a "
               "query against dpsql serve "
               "(tests/bi/record_fixtures.py)", _record(srv, pgcli_run))

        def sqlalchemy_run() -> None:
            import pandas as pd
            import sqlalchemy as sa

            eng = sa.create_engine(f"postgresql+psycopg://analyst@127.0.0.1:{srv.port}/"
                                   f"{srv.database}")
            insp = sa.inspect(eng)
            insp.get_schema_names()
            for schema in ("public", None):
                insp.get_table_names(schema=schema)
                insp.get_view_names(schema=schema)
            insp.get_columns("trips", schema="public")
            insp.get_pk_constraint("trips", schema="public")
            insp.get_foreign_keys("trips", schema="public")
            insp.get_indexes("trips", schema="public")
            insp.get_table_comment("trips", schema="public")
            insp.has_table("trips", schema="public")
            pd.read_sql("SELECT mode, COUNT(*) AS trips FROM trips GROUP BY mode", eng)
            pd.read_sql(sa.text("SELECT region, COUNT(*) AS n FROM trips WHERE mode = :m "
                                "GROUP BY region"), eng, params={"m": "car"})
            eng.dispose()

        import sqlalchemy

        _write("sqlalchemy_pandas", "SQLAlchemy postgresql+psycopg / pandas",
               f"SQLAlchemy {sqlalchemy.__version__}",
               "recorded for real: the inspector calls Superset makes (schemas, tables, "
               "views, columns, keys, indexes, comment) and pandas.read_sql against dpsql "
               "serve (tests/bi/record_fixtures.py)", _record(srv, sqlalchemy_run))
    finally:
        srv.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
