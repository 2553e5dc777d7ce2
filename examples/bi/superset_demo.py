"""Apache Superset on a dpsql release, end to end, over both routes, through Superset's API.

Run it from dpsql's own environment (it builds the release and runs ``dpsql serve``)::

    python examples/bi/superset_demo.py --workdir /tmp/superset-demo

What it does, as a user would:

1. **Installs Superset** (``apache-superset==6.1.0`` by default, ``--superset-version``)
   into a virtualenv of its own (``WORKDIR/venv``; reused when present) with psycopg2,
   and then this dpsql checkout (``pip install '<checkout>[bi]'``) into the same
   environment for the ``dpsql://`` route. If pip cannot put dpsql beside that Superset
   (older Superset versions pin pyarrow and numpy below dpsql's), the script says so
   and goes on with the PostgreSQL route alone.
2. **Initialises Superset**: a config file with a random ``SECRET_KEY`` and a SQLite
   metadata database, ``superset db upgrade``, an admin user (``admin``/``admin``),
   ``superset init``, then ``superset run`` on a free loopback port.
3. **Builds a release** ``stops.duckdb`` of 40,000 synthetic, seeded police stops
   (precinct 1-5 and neighborhood from a spine file, race, problem, weekday 1-7, hour
   binned by the hour); seeded, hence NOT private: a demo. It serves it with ``dpsql
   serve`` on another loopback port.
4. **Registers the release twice** through ``POST /api/v1/database/``: as
   ``dpsql:////abs/path/stops.duckdb`` (the SQLAlchemy dialect inside Superset) and as
   ``postgresql+psycopg2://superset@127.0.0.1:PORT/stops`` (Superset's own psycopg2
   talking to ``dpsql serve``; dpsql need not be installed in Superset's environment).
   For each: the connection test, the schemas Superset lists, a dataset on table
   ``stops`` and its columns.
5. **Builds the common charts** (``POST /api/v1/chart/``, then their data through
   ``POST /api/v1/chart/data``, which is what a dashboard does): a big number, a bar
   chart by category, a histogram of the binned ``hour`` (GROUP BY hour; and Superset's
   own histogram viz, which asks for raw rows), a line over the ordinal ``weekday``, a
   pivot table, a filtered bar chart; plus a SQL Lab query with error columns. For each
   it prints the SQL Superset sent and the rows it got back, or the error.

Both servers are stopped at the end. ``--keep-running`` leaves them up (URLs printed) to
look at the charts in a browser. Installing Superset takes a few minutes the first time.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
ROWS = 40_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("superset-demo"))
    ap.add_argument("--superset-version", default="6.1.0")
    ap.add_argument("--keep-running", action="store_true")
    args = ap.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)

    routes_ok = install(work, args.superset_version)
    release = build_release(work)
    procs = []
    try:
        pg_port, serve = start_dpsql_serve(release, work)
        procs.append(serve)
        url, superset = start_superset(work)
        procs.append(superset)
        api = Api(url)
        routes = {"postgresql (dpsql serve)":
                  f"postgresql+psycopg2://superset@127.0.0.1:{pg_port}/stops"}
        if routes_ok:
            routes = {"dpsql:// (SQLAlchemy dialect)": f"dpsql:///{release}", **routes}
        for name, uri in routes.items():
            run_route(api, name, uri)
        if args.keep_running:
            print(f"\nSuperset: {url} (admin/admin); dpsql serve: port {pg_port}. Ctrl-C stops.")
            procs[-1].wait()
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(30)
    return 0


# --------------------------------------------------------------------------------------
# Installing and starting Superset
# --------------------------------------------------------------------------------------

def sh(cmd: list[str], env: dict | None = None, quiet: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 and not quiet:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc


def install(work: Path, version: str) -> bool:
    """Superset (and psycopg2) into WORKDIR/venv; then dpsql. Returns whether dpsql
    installed there (the dpsql:// route)."""
    venv = work / "venv"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    if not (venv / "bin" / "superset").exists():
        print(f"installing apache-superset=={version} into {venv} (a few minutes)...")
        sh([sys.executable, "-m", "venv", str(venv)], quiet=False)
        # Two fixes to Superset 6.1's own metadata, found by this script: flask-caching
        # 2.5 changed signatures Superset overrides (Cache._memoize_make_cache_key(
        # timeout=...), ignore_delete_many_errors) and Superset fails at start-up, so
        # 2.3 as in its lock file; and db_engine_specs/aws_iam.py imports cachetools,
        # which it does not declare (every connection test fails without it)
        sh(pip + [f"apache-superset=={version}", "psycopg2-binary", "flask-caching<2.4",
                  "cachetools"], quiet=False)
    have = sh([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"]).stdout
    versions = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(have)}
    print(f"Superset {versions.get('apache-superset')}: SQLAlchemy {versions.get('sqlalchemy')}, "
          f"sqlglot {versions.get('sqlglot')}, pandas {versions.get('pandas')}, "
          f"Python {sys.version.split()[0]}")
    proc = sh(pip + [f"{CHECKOUT}[bi]"])
    if proc.returncode != 0:
        print("dpsql:// route: dpsql cannot be installed beside this Superset:\n  "
              + "\n  ".join(proc.stderr.strip().splitlines()[-6:]))
        return False
    after = json.loads(sh([str(venv / "bin" / "python"), "-m", "pip", "list",
                           "--format=json"]).stdout)
    after = {p["name"].lower().replace("_", "-"): p["version"] for p in after}
    changed = {k: (versions.get(k), v) for k, v in after.items()
               if k in versions and versions[k] != v}
    print(f"dpsql {after.get('dpsql')} installed beside it; Superset's own pins "
          f"{'unchanged' if not changed else f'CHANGED: {changed}'}; sqlglotc "
          f"{after.get('sqlglotc', 'not installed (pure-Python sqlglot)')}")
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def superset_env(work: Path) -> dict:
    config = work / "superset_config.py"
    if not config.exists():
        config.write_text(
            f"SECRET_KEY = {secrets.token_hex(32)!r}\n"
            f"SQLALCHEMY_DATABASE_URI = 'sqlite:///{work / 'superset.db'}'\n"
            "TALISMAN_ENABLED = False\n"
            "SUPERSET_WEBSERVER_TIMEOUT = 120\n")
    return {**os.environ, "SUPERSET_CONFIG_PATH": str(config), "FLASK_APP": "superset",
            "PYTHONWARNINGS": "ignore"}


def start_superset(work: Path) -> tuple[str, subprocess.Popen]:
    env, bin_ = superset_env(work), work / "venv" / "bin"
    if not (work / "superset.db").exists():
        print("initialising Superset: db upgrade, admin user, init...")
        sh([str(bin_ / "superset"), "db", "upgrade"], env, quiet=False)
        sh([str(bin_ / "superset"), "fab", "create-admin", "--username", "admin",
            "--firstname", "Ada", "--lastname", "Admin", "--email", "admin@example.org",
            "--password", "admin"], env, quiet=False)
        sh([str(bin_ / "superset"), "init"], env, quiet=False)
    port = free_port()
    log = open(work / "superset.log", "w")
    proc = subprocess.Popen([str(bin_ / "superset"), "run", "-h", "127.0.0.1", "-p", str(port),
                             "--with-threads"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                if r.read() == b"OK":
                    print(f"Superset is up at {url}")
                    return url, proc
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"superset run exited: see {work / 'superset.log'}")
        time.sleep(1)
    raise SystemExit(f"Superset did not answer /health within 4 minutes: {work / 'superset.log'}")


# --------------------------------------------------------------------------------------
# The release and dpsql serve (this interpreter: dpsql's own environment)
# --------------------------------------------------------------------------------------

SPEC = {
    "name": "stops", "source": "stops.parquet", "neighbouring": "add_remove",
    "budget": {"rho": 1.0},
    "attributes": {
        # a public spine read from a CSV, as geography usually comes: its values are text,
        # and precinct comes back as an integer because the source column is one
        "geo": {"kind": "hierarchy", "columns": ["precinct", "neighborhood"],
                "spine_file": "neighborhoods.csv"},
        "race": {"kind": "categorical",
                 "domain": ["Black", "White", "Latino", "Asian", "Native American", "Other"]},
        "problem": {"kind": "categorical", "domain": ["traffic", "suspicious"]},
        "weekday": {"kind": "categorical", "domain": [1, 2, 3, 4, 5, 6, 7]},
        "hour": {"kind": "range", "lower": 0, "upper": 24, "width": 1, "type": "integer"},
    },
    "views": [
        {"name": "place", "levels": ["geo", "race", "problem"], "mechanism": "inftda",
         "weight": 2},
        {"name": "week", "levels": ["weekday", "problem"], "mechanism": "inftda"},
        {"name": "hours", "levels": ["hour"], "mechanism": "btree"},
        {"name": "race_hour", "levels": ["race", "hour"], "mechanism": "inftda"},
    ],
}


def build_release(work: Path) -> Path:
    import duckdb

    from dpsql.release import build_release as build
    from dpsql.spec import ReleaseSpec

    out = work / "stops.duckdb"
    if out.exists():
        return out
    con = duckdb.connect()
    con.execute("SELECT setseed(0.21)")
    con.execute(f"""
        COPY (
          SELECT precinct, 'P' || precinct || '-' || (1 + floor(random() * 4)::INT)
                 AS neighborhood, * EXCLUDE (precinct) FROM (
          SELECT 1 + (floor(random() * 100)::INT % 5) AS precinct,
                 CASE WHEN r < 0.38 THEN 'Black' WHEN r < 0.72 THEN 'White'
                      WHEN r < 0.84 THEN 'Latino' WHEN r < 0.90 THEN 'Asian'
                      WHEN r < 0.95 THEN 'Native American' ELSE 'Other' END AS race,
                 CASE WHEN random() < 0.6 THEN 'traffic' ELSE 'suspicious' END AS problem,
                 1 + (floor(random() * 7))::INT AS weekday,
                 -- an evening peak: 18h + 4h x a normal draw (Box-Muller), round the clock
                 (floor(18 + 4 * sqrt(-2 * ln(random())) * cos(2 * pi() * random()))::INT
                  + 48) % 24 AS hour
          FROM (SELECT random() AS r FROM range({ROWS})))
        ) TO '{work / 'stops.parquet'}' (FORMAT parquet)""")
    con.close()
    (work / "neighborhoods.csv").write_text("precinct,neighborhood\n" + "".join(
        f"{p},P{p}-{k}\n" for p in range(1, 6) for k in range(1, 5)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(ReleaseSpec.from_dict(SPEC, base_dir=work), out, seed=21, progress=False)
    print(f"built {out} from {ROWS:,} synthetic stops (seeded: NOT private, a demo)")
    return out


def start_dpsql_serve(release: Path, work: Path) -> tuple[int, subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-m", "dpsql.cli", "serve", str(release),
                             "--port", "0", "-v"], stdout=subprocess.PIPE,
                            stderr=open(work / "dpsql-serve.log", "w"), text=True)
    line = proc.stdout.readline()
    match = re.search(r"postgresql://\S+:(\d+)/", line)
    if not match:
        raise SystemExit(f"dpsql serve did not start: {line!r}; see {work}/dpsql-serve.log")
    print(f"dpsql serve is up: {line.strip()}")
    return int(match.group(1)), proc


# --------------------------------------------------------------------------------------
# Superset's REST API
# --------------------------------------------------------------------------------------

class ApiError(Exception):
    pass


class Api:
    """A logged-in client of Superset's REST API (JWT + CSRF token + session cookie)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.headers = {"Content-Type": "application/json", "Referer": url}
        token = self.call("POST", "/api/v1/security/login",
                          {"username": "admin", "password": "admin", "provider": "db"})
        self.headers["Authorization"] = f"Bearer {token['access_token']}"
        self.headers["X-CSRFToken"] = self.call("GET", "/api/v1/security/csrf_token/")["result"]

    def call(self, method: str, path: str, body: object = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers=self.headers)
        try:
            with self.opener.open(req, timeout=300) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            try:
                doc = json.loads(text)
            except ValueError:
                raise ApiError(f"HTTP {err.code}: {text[:400]}") from None
            raise ApiError(f"HTTP {err.code}: {_error_text(doc)}") from None


def _error_text(doc: dict) -> str:
    if doc.get("errors"):
        return " | ".join(str(e.get("message")) for e in doc["errors"])
    return str(doc.get("message", doc))[:600]


def run_route(api: Api, name: str, uri: str) -> None:
    print(f"\n{'=' * 100}\nroute: {name}\n  SQLAlchemy URI: {uri}")
    try:
        api.call("POST", "/api/v1/database/test_connection/",
                 {"sqlalchemy_uri": uri, "database_name": name})
        print("  connection test: OK")
        db = api.call("POST", "/api/v1/database/",
                      {"database_name": name, "sqlalchemy_uri": uri, "expose_in_sqllab": True})
    except ApiError as err:
        print(f"  cannot register the database: {err}")
        return
    db_id = db["id"]
    schemas = api.call("GET", f"/api/v1/database/{db_id}/schemas/")["result"]
    print(f"  schemas Superset lists: {schemas}")
    schema = "stops" if "stops" in schemas else "public" if "public" in schemas else schemas[0]
    tables = api.call("GET", f"/api/v1/database/{db_id}/tables/?q=(schema_name:{schema},force:!t)")
    print(f"  tables in {schema!r}: {[t['value'] for t in tables.get('result', [])]}")
    try:
        ds = api.call("POST", "/api/v1/dataset/",
                      {"database": db_id, "schema": schema, "table_name": "stops"})
    except ApiError as err:
        print(f"  cannot create the dataset: {err}")
        return
    info = api.call("GET", f"/api/v1/dataset/{ds['id']}")["result"]
    print("  dataset columns: " + ", ".join(f"{c['column_name']} {c.get('type')}"
                                            for c in info["columns"]))
    print(f"  dataset metrics: {[m['metric_name'] + ' = ' + m['expression'] for m in info['metrics']]}")
    made = [show_chart(api, ds["id"], name, title, viz, form) for title, viz, form in charts()]
    sql_lab(api, db_id, schema)
    # Superset's SQLite metadata keeps a UNIQUE(table_name) from an old migration: the next
    # route's dataset on `stops` needs this one gone (charts first, they point at it)
    ids = [i for i in made if i is not None]
    if ids:
        api.call("DELETE", f"/api/v1/chart/?q=!({','.join(map(str, ids))})")
    api.call("DELETE", f"/api/v1/dataset/{ds['id']}")


def charts() -> list[tuple[str, str, dict]]:
    """(title, viz_type, the query Superset's front end builds for it)."""
    count = "count"
    return [
        ("big number: all stops", "big_number_total",
         {"metrics": [count], "columns": [], "row_limit": 10}),
        ("bar by category: stops by race", "echarts_timeseries_bar",
         {"columns": ["race"], "metrics": [count], "orderby": [[count, False]],
          "row_limit": 100}),
        ("histogram of a binned attribute: stops by hour (GROUP BY hour)",
         "echarts_timeseries_bar",
         {"columns": ["hour"], "metrics": [count], "orderby": [["hour", True]],
          "row_limit": 100}),
        ("Superset's histogram viz on hour (it asks for raw values)", "histogram_v2",
         {"columns": ["hour"], "metrics": [], "row_limit": 10000}),
        ("line over an ordinal attribute: stops by weekday", "echarts_timeseries_line",
         {"columns": ["weekday"], "metrics": [count], "orderby": [["weekday", True]],
          "row_limit": 100}),
        ("pivot table: precinct x problem", "pivot_table_v2",
         {"columns": ["precinct", "problem"], "metrics": [count],
          "orderby": [[count, False]], "row_limit": 1000}),
        ("filtered bar: precincts 1-2, traffic stops, by race", "echarts_timeseries_bar",
         {"columns": ["race"], "metrics": [count], "orderby": [[count, False]],
          "row_limit": 100,
          "filters": [{"col": "precinct", "op": "IN", "val": [1, 2]},
                      {"col": "problem", "op": "==", "val": "traffic"}]}),
        ("filtered bar: evening stops (18 <= hour < 24) by race", "echarts_timeseries_bar",
         {"columns": ["race"], "metrics": [count], "orderby": [[count, False]],
          "row_limit": 100,
          "filters": [{"col": "hour", "op": ">=", "val": 18},
                      {"col": "hour", "op": "<", "val": 24}]}),
    ]


def show_chart(api: Api, ds_id: int, route: str, title: str, viz: str, query: dict
               ) -> int | None:
    """Save the chart, fetch its data, print both; the chart's id (None if not saved)."""
    query = {"filters": [], "extras": {"having": "", "where": ""}, "applied_time_extras": {},
             "annotation_layers": [], "series_limit": 0, "order_desc": True, **query}
    form = {"datasource": f"{ds_id}__table", "viz_type": viz, "metrics": query["metrics"],
            "groupby": query["columns"], "adhoc_filters": [], "row_limit": query["row_limit"]}
    context = {"datasource": {"id": ds_id, "type": "table"}, "force": True,
               "queries": [query], "form_data": form, "result_format": "json",
               "result_type": "full"}
    print(f"\n  -- {title} [{viz}]")
    chart = api.call("POST", "/api/v1/chart/", {
        "slice_name": f"{title} ({route})", "viz_type": viz, "datasource_id": ds_id,
        "datasource_type": "table", "params": json.dumps(form),
        "query_context": json.dumps(context)})
    try:
        result = api.call("POST", "/api/v1/chart/data", context)["result"][0]
    except ApiError as err:
        print(f"     chart id {chart['id']}: ERROR {err}")
        return chart["id"]
    print(f"     chart id {chart['id']}; SQL Superset sent: "
          + " ".join(str(result.get("query", "")).split()))
    if result.get("error"):
        print(f"     ERROR {result['error']}")
        return chart["id"]
    data = result.get("data") or []
    print(f"     {len(data)} row(s), columns {result.get('colnames')}")
    for row in data[:12]:
        print(f"       {row}")
    if len(data) > 12:
        print(f"       ... ({len(data) - 12} more)")
    return chart["id"]


def sql_lab(api: Api, db_id: int, schema: str) -> None:
    sql = ("SELECT race, COUNT(*) AS stops, dp_ci_low(0.95) AS low, dp_ci_high(0.95) AS high "
           "FROM stops GROUP BY race ORDER BY stops DESC")
    print(f"\n  -- SQL Lab: {sql}")
    try:
        out = api.call("POST", "/api/v1/sqllab/execute/",
                       {"database_id": db_id, "sql": sql, "schema": schema, "runAsync": False,
                        "client_id": secrets.token_hex(5)})
    except ApiError as err:
        print(f"     ERROR {err}")
        return
    for row in out.get("data", [])[:8]:
        print(f"       {row}")


if __name__ == "__main__":
    raise SystemExit(main())
