"""``dpsql serve`` overhead: dashboard queries through psycopg -> ``dpsql serve`` against the
same queries through ``dpsql.connect`` in process, in one run.

The server runs as a separate process (``dpsql serve RELEASE --port 0``, as deployed), so
client and server do not share a GIL. Both sides answer the same queries on the same
release, interleaved query by query (drift on a shared machine hits both alike), each with
a warm plan cache (a dashboard re-issues its queries). Reported per side: latency p50/p99
(ms) of execute + fetch-all, and queries per second of one sequential client; then

* ``overhead_p50_ms``: server p50 minus in-process p50 (target: <= 2 ms), and the ratio
  of the two p50s;
* ``protocol_floor_ms``: p50 of ``SELECT 1`` through the server (the wire round trip
  plus routing, no planner);
* ``concurrent_qps``: total queries per second of ``CLIENTS`` psycopg clients at once, and
  its ratio to one client;
* ``server_tls``: the same queries through a second server, started with a password
  (SCRAM-SHA-256) and TLS (a throwaway CA from ``trustme``; the client checks the
  certificate, ``sslmode=verify-full``, and binds the channel), timed in the same
  interleaved loop; ``tls_overhead_p50_ms`` is its p50 minus the plain server's;
* ``connect_ms``: median time to open a connection and run ``SELECT 1``, without a
  password or TLS against SCRAM + TLS + channel binding (the PBKDF2 of the password on
  the client and the TLS handshake are most of the difference).

* ``hostile``: bounded work per statement. :data:`HOSTILE_CLIENTS` clients send maximal
  hostile statements (just under the 1 MiB statement limit, the shapes that take longest
  to plan: a chain of ORs, a UNION ALL of counts, a select list of 100,000 items, the
  deepest allowed nesting) for :data:`HOSTILE_SECONDS` seconds to a server with
  ``--statement-timeout 1``, while :data:`SIMPLE_CLIENTS` other clients send the
  dashboard queries and one more opens a new connection every 0.2 s. Reported: the
  simple queries' p50/p99 with and without the hostile load (the reference, same run,
  same server), connection failures, and the longest a hostile statement took before it
  was stopped (target: p99 <= 100 ms, no failure, <= timeout + 0.5 s). The same load
  against a server that plans every statement in its session thread (the design before
  planning processes, by setting ``INLINE_BYTES`` above the statement limit) is measured
  for comparison, for :data:`INLINE_SECONDS` seconds.

Answers are compared once (server == in process) before timing. Run:
``.venv/bin/python benchmarks/serve.py`` (about three minutes; ``--hostile-only`` runs
the last part alone and keeps the other numbers of ``results/serve.json``).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

import dpsql  # noqa: E402
from dpsql.datasets import trips_spec, write_trips  # noqa: E402
from dpsql.dbapi import SeededReleaseWarning  # noqa: E402

N_ROWS = 100_000
ROUNDS = 60  # timed runs of every query on each side
CLIENTS = 4
CONCURRENT_SECONDS = 5.0

QUERIES = [
    ("SELECT region, COUNT(*) AS n FROM trips GROUP BY region ORDER BY region", None),
    ("SELECT mode, COUNT(*) AS n, dp_ci_low(0.95) AS lo, dp_ci_high(0.95) AS hi FROM trips "
     "GROUP BY mode ORDER BY mode", None),
    ("SELECT region, province, COUNT(*) FROM trips WHERE mode = ? GROUP BY region, province "
     "ORDER BY 1, 2", ["car"]),
    ("SELECT COUNT(*), dp_stderr() FROM trips WHERE distance BETWEEN ? AND ?", [10, 50]),
    ("SELECT mode, COUNT(*) FROM trips WHERE distance < ? GROUP BY mode ORDER BY mode", [30]),
    ("SELECT COUNT(*) FROM trips WHERE age >= ? AND age < ?", [20, 40]),
    ("SELECT region, COUNT(*) FROM trips GROUP BY ROLLUP (region) ORDER BY 1 NULLS FIRST",
     None),
    ("SELECT MEDIAN(distance) FROM trips", None),
]


def build(base: Path) -> Path:
    from dpsql.release import build_release
    from dpsql.spec import ReleaseSpec

    write_trips(base, N_ROWS, seed=3)
    out = base / "trips.duckdb"
    spec = ReleaseSpec.from_dict(trips_spec(gaussian_tree=False), base_dir=base)
    build_release(spec, out, seed=5, progress=False)
    return out


def start_server(release: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "dpsql.cli", "serve", str(release),
                             "--port", "0", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "postgresql://" not in line:
        proc.kill()
        raise RuntimeError(f"dpsql serve did not start: {line!r}")
    return proc, int(line.split("postgresql://127.0.0.1:")[1].split("/")[0])


def pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(lat: list[float]) -> dict:
    return {"p50_ms": statistics.median(lat) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3,
            "mean_ms": statistics.fmean(lat) * 1e3, "qps": 1.0 / statistics.fmean(lat),
            "n": len(lat)}


def tls_files(base: Path) -> tuple[Path, Path, Path, Path]:
    """(certificate, key, CA certificate, password file) for the TLS server."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    paths = base / "cert.pem", base / "key.pem", base / "ca.pem", base / "pw"
    cert.cert_chain_pems[0].write_to_path(str(paths[0]))
    cert.private_key_pem.write_to_path(str(paths[1]))
    ca.cert_pem.write_to_path(str(paths[2]))
    paths[3].write_text(PASSWORD + "\n")
    for p in (paths[1], paths[3]):
        p.chmod(0o600)
    return paths


PASSWORD = "bench-password"


def connect_ms(dsn: str, n: int = 30) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute("SELECT 1").fetchall()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def concurrent_qps(dsn: str, clients: int, seconds: float) -> float:
    counts = [0] * clients
    errors: list[str] = []
    stop = time.perf_counter() + seconds

    def run(i: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as con:
                k = i
                while time.perf_counter() < stop:
                    q, p = QUERIES[k % len(QUERIES)]
                    con.execute(pg_sql(q), p).fetchall()
                    counts[i] += 1
                    k += 1
        except Exception as err:  # noqa: BLE001
            errors.append(repr(err))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return sum(counts) / (time.perf_counter() - t0)


HOSTILE_CLIENTS = 4
SIMPLE_CLIENTS = 2
HOSTILE_SECONDS = 30.0
INLINE_SECONDS = 15.0
BASELINE_SECONDS = 10.0
HOSTILE_TIMEOUT = 1.0
MAX_STATEMENT = 1 << 20


def hostile_statements() -> list[str]:
    """Maximal hostile statements: each just under :data:`MAX_STATEMENT` bytes."""
    def fill(head: str, part: str, sep: str, tail: str = "") -> str:
        n = (MAX_STATEMENT - 64 - len(head) - len(tail)) // (len(part) + len(sep) + 6)
        body = sep.join(part.format(i=i) for i in range(n))
        return head + body + tail

    out = [fill("SELECT COUNT(*) FROM trips WHERE ", "mode = 'm{i}'", " OR "),
           fill("", "SELECT COUNT(*) FROM trips WHERE mode = 'm{i}'", " UNION ALL "),
           fill("SELECT ", "{i} AS c{i}", ", "),
           fill("SELECT " + "(" * 120, "{i}", " + ", ")" * 120)]
    return [q for q in out if len(q.encode()) <= MAX_STATEMENT]


def run_server_cli(release: Path, *extra: str, inline: bool = False
                   ) -> tuple[subprocess.Popen, int]:
    """``dpsql serve`` as a subprocess; ``inline=True`` plans every statement in the
    session thread (the design before planning processes)."""
    if not inline:
        return start_server(release, *extra)
    code = ("import sys, dpsql.server._session as s; s.INLINE_BYTES = 1 << 40; "
            "from dpsql.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", str(release), "--port", "0",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    line = proc.stdout.readline()
    if "postgresql://" not in line:
        proc.kill()
        raise RuntimeError(f"dpsql serve did not start: {line!r}")
    return proc, int(line.split("postgresql://127.0.0.1:")[1].split("/")[0])


def simple_load(dsn: str, seconds: float, hostile: list[str] | None) -> dict:
    """Simple clients (and, with ``hostile``, hostile ones and a connecting client) for
    ``seconds``: the simple queries' latencies, connection failures, hostile outcomes."""
    stop = time.perf_counter() + seconds
    lat: list[float] = []
    failures: list[str] = []
    outcomes: list[tuple[str, float]] = []
    connects = [0]
    lock = threading.Lock()

    def simple(i: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
                k = i
                while time.perf_counter() < stop:
                    q, p = QUERIES[k % len(QUERIES)]
                    t0 = time.perf_counter()
                    con.execute(pg_sql(q), p).fetchall()
                    with lock:
                        lat.append(time.perf_counter() - t0)
                    k += 1
        except Exception as err:  # noqa: BLE001
            failures.append(f"simple client: {err!r}")

    def bad(i: int) -> None:
        k = i
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
                while time.perf_counter() < stop:
                    sql = hostile[k % len(hostile)]
                    t0 = time.perf_counter()
                    try:
                        con.execute(sql).fetchall()
                        state = "ok"
                    except psycopg.Error as err:
                        state = err.sqlstate or "?"
                    outcomes.append((state, time.perf_counter() - t0))
                    k += 1
        except Exception as err:  # noqa: BLE001
            failures.append(f"hostile client: {err!r}")

    def connector() -> None:
        while time.perf_counter() < stop:
            try:
                with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as con:
                    con.execute("SELECT 1").fetchall()
                connects[0] += 1
            except Exception as err:  # noqa: BLE001
                failures.append(f"new connection: {err!r}")
            time.sleep(0.2)

    threads = [threading.Thread(target=simple, args=(i,)) for i in range(SIMPLE_CLIENTS)]
    if hostile:
        threads += [threading.Thread(target=bad, args=(i,)) for i in range(HOSTILE_CLIENTS)]
        threads.append(threading.Thread(target=connector))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stopped = [d for st, d in outcomes if st == "57014"]
    by_state: dict[str, int] = {}
    for st, _ in outcomes:
        by_state[st] = by_state.get(st, 0) + 1
    return {"seconds": seconds, "simple": summary(lat) if lat else None,
            "simple_max_ms": max(lat) * 1e3 if lat else None,
            "failures": len(failures), "failure_examples": failures[:3],
            "new_connections": connects[0], "hostile_statements": len(outcomes),
            "hostile_outcomes": by_state,
            "hostile_longest_s": max((d for _, d in outcomes), default=None),
            "hostile_stopped_longest_s": max(stopped, default=None)}


def hostile_part(release: Path) -> dict:
    hostile = hostile_statements()
    extra = ("--statement-timeout", str(HOSTILE_TIMEOUT),
             "--max-statement-size", str(MAX_STATEMENT))
    out: dict = {"statement_timeout_s": HOSTILE_TIMEOUT, "max_statement_size": MAX_STATEMENT,
                 "hostile_clients": HOSTILE_CLIENTS, "simple_clients": SIMPLE_CLIENTS,
                 "hostile_bytes": [len(q.encode()) for q in hostile]}
    for name, inline, seconds in (("planning_processes", False, HOSTILE_SECONDS),
                                  ("inline_planning", True, INLINE_SECONDS)):
        proc, port = run_server_cli(release, *extra, inline=inline)
        dsn = f"host=127.0.0.1 port={port} dbname=trips user=bench sslmode=disable"
        try:
            with psycopg.connect(dsn, autocommit=True) as con:  # start the pool, warm up
                for _ in range(120):  # the first long statement waits for the processes
                    try:
                        con.execute("SELECT COUNT(*) FROM trips -- " + "x" * 2000).fetchall()
                        break
                    except psycopg.errors.QueryCanceled:
                        time.sleep(1)
            base = simple_load(dsn, BASELINE_SECONDS, None)
            load = simple_load(dsn, seconds, hostile)
        finally:
            proc.terminate()
            proc.wait(20)
        out[name] = {"baseline": base, "hostile": load}
    got = out["planning_processes"]["hostile"]
    stopped = got["hostile_stopped_longest_s"]
    out["targets"] = {"simple_p99_ms": 100.0, "failures": 0,
                      "stopped_within_s": HOSTILE_TIMEOUT + 0.5}
    out["simple_p99_ms"] = got["simple"]["p99_ms"]
    out["simple_p99_baseline_ms"] = out["planning_processes"]["baseline"]["simple"]["p99_ms"]
    out["p99_ratio_under_hostile_load"] = out["simple_p99_ms"] / out["simple_p99_baseline_ms"]
    out["met"] = {"simple_p99": got["simple"]["p99_ms"] <= 100.0,
                  "failures": got["failures"] == 0,
                  "stopped": stopped is not None and stopped <= HOSTILE_TIMEOUT + 0.5}
    return out


def print_hostile(h: dict) -> None:
    def latency(run: dict) -> str:
        if run["simple"] is None:  # the inline reference can starve every simple client
            return "no simple query answered"
        return (f"{run['simple']['p50_ms']:.1f}/{run['simple']['p99_ms']:.1f} ms (max "
                f"{run['simple_max_ms']:.0f})")

    for name in ("planning_processes", "inline_planning"):
        b, x = h[name]["baseline"], h[name]["hostile"]
        print(f"{name}: simple p50/p99 {latency(b)} alone, {latency(x)} under "
              f"{HOSTILE_CLIENTS} hostile clients; failures {x['failures']}; hostile "
              f"{x['hostile_outcomes']}, stopped within {x['hostile_stopped_longest_s']} s")


def main() -> None:
    import json

    if "--hostile-only" in sys.argv:
        from _common import RESULTS  # noqa: E402

        with tempfile.TemporaryDirectory() as tmp:
            release = build(Path(tmp))
            hostile = hostile_part(release)
        payload = json.loads((RESULTS / "serve.json").read_text())
        payload["hostile"] = hostile
        for key in ("benchmark", "machine"):
            payload.pop(key, None)
        print_hostile(hostile)
        print("->", write("serve", payload))
        return
    with tempfile.TemporaryDirectory() as tmp:
        release = build(Path(tmp))
        cert, key, ca, pw = tls_files(Path(tmp))
        proc, port = start_server(release)
        proc_tls, port_tls = start_server(release, "--password-file", str(pw), "--tls-cert",
                                          str(cert), "--tls-key", str(key))
        try:
            dsn = f"host=127.0.0.1 port={port} dbname=trips user=bench sslmode=disable"
            dsn_tls = (f"host=127.0.0.1 port={port_tls} dbname=trips user=bench "
                       f"password={PASSWORD} sslmode=verify-full sslrootcert={ca} "
                       "channel_binding=require")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeededReleaseWarning)
                local = dpsql.connect(release)
            remote = psycopg.connect(dsn, autocommit=True)
            remote_tls = psycopg.connect(dsn_tls, autocommit=True)
            cur = local.cursor()

            def run_local(q, p):
                cur.execute(q, p)
                return cur.fetchall()

            def run_remote(q, p, con=remote):
                return con.execute(pg_sql(q), p).fetchall()

            for q, p in QUERIES:  # warm the plan caches; answers must agree
                a, b = run_local(q, p), [tuple(r) for r in run_remote(q, p)]
                c = [tuple(r) for r in run_remote(q, p, remote_tls)]
                assert a == b == c, (q, a, b, c)
            lat_local, lat_remote, lat_tls, floor = [], [], [], []
            per_query = {}
            for _ in range(ROUNDS):
                for i, (q, p) in enumerate(QUERIES):
                    t0 = time.perf_counter()
                    run_local(q, p)
                    t1 = time.perf_counter()
                    run_remote(q, p)
                    t2 = time.perf_counter()
                    run_remote(q, p, remote_tls)
                    t3 = time.perf_counter()
                    lat_local.append(t1 - t0)
                    lat_remote.append(t2 - t1)
                    lat_tls.append(t3 - t2)
                    per_query.setdefault(i, ([], []))
                    per_query[i][0].append(t1 - t0)
                    per_query[i][1].append(t2 - t1)
                t0 = time.perf_counter()
                remote.execute("SELECT 1").fetchall()
                floor.append(time.perf_counter() - t0)
            one = concurrent_qps(dsn, 1, CONCURRENT_SECONDS)
            many = concurrent_qps(dsn, CLIENTS, CONCURRENT_SECONDS)
            connects = {"no_password_no_tls": connect_ms(dsn),
                        "scram_tls_channel_binding": connect_ms(dsn_tls)}
            remote.close()
            remote_tls.close()
            local.close()
            hostile = hostile_part(release)
        finally:
            for p in (proc, proc_tls):
                p.terminate()
                p.wait(20)
    inproc, server, server_tls = summary(lat_local), summary(lat_remote), summary(lat_tls)
    payload = {
        "description": "psycopg -> dpsql serve (separate process) vs dpsql.connect in "
                       "process; same release, same queries, interleaved, warm plan caches",
        "rows": N_ROWS, "queries": len(QUERIES), "rounds": ROUNDS,
        "in_process": inproc, "server": server,
        "overhead_p50_ms": server["p50_ms"] - inproc["p50_ms"],
        "overhead_p50_target_ms": 2.0,
        "overhead_p50_met": server["p50_ms"] - inproc["p50_ms"] <= 2.0,
        "p50_ratio_server_over_in_process": server["p50_ms"] / inproc["p50_ms"],
        "protocol_floor_ms": statistics.median(floor) * 1e3,
        "per_query_p50_ms": [
            {"sql": QUERIES[i][0], "in_process": statistics.median(a) * 1e3,
             "server": statistics.median(b) * 1e3} for i, (a, b) in per_query.items()],
        "concurrent_qps": {"clients": CLIENTS, "one_client": one, "all_clients": many,
                           "ratio": many / one},
        "server_tls": server_tls,
        "tls_overhead_p50_ms": server_tls["p50_ms"] - server["p50_ms"],
        "connect_ms": connects,
        "hostile": hostile,
    }
    path = write("serve", payload)
    print(f"in process p50 {inproc['p50_ms']:.2f} ms, server p50 {server['p50_ms']:.2f} ms "
          f"(+{payload['overhead_p50_ms']:.2f} ms, x{payload['p50_ratio_server_over_in_process']:.2f}); "
          f"p99 {inproc['p99_ms']:.2f} / {server['p99_ms']:.2f} ms; SELECT 1 "
          f"{payload['protocol_floor_ms']:.2f} ms; {CLIENTS} clients {many:.0f} q/s "
          f"(x{many / one:.2f} one client); with SCRAM + TLS p50 {server_tls['p50_ms']:.2f} ms "
          f"(+{payload['tls_overhead_p50_ms']:.2f} ms); connect {connects['no_password_no_tls']:.1f}"
          f" ms plain, {connects['scram_tls_channel_binding']:.1f} ms SCRAM + TLS -> {path}")
    print_hostile(hostile)


if __name__ == "__main__":
    main()
