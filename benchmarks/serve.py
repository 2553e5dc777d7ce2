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

Answers are compared once (server == in process) before timing. Run:
``.venv/bin/python benchmarks/serve.py`` (about a minute).
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


def main() -> None:
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
    }
    path = write("serve", payload)
    print(f"in process p50 {inproc['p50_ms']:.2f} ms, server p50 {server['p50_ms']:.2f} ms "
          f"(+{payload['overhead_p50_ms']:.2f} ms, x{payload['p50_ratio_server_over_in_process']:.2f}); "
          f"p99 {inproc['p99_ms']:.2f} / {server['p99_ms']:.2f} ms; SELECT 1 "
          f"{payload['protocol_floor_ms']:.2f} ms; {CLIENTS} clients {many:.0f} q/s "
          f"(x{many / one:.2f} one client); with SCRAM + TLS p50 {server_tls['p50_ms']:.2f} ms "
          f"(+{payload['tls_overhead_p50_ms']:.2f} ms); connect {connects['no_password_no_tls']:.1f}"
          f" ms plain, {connects['scram_tls_channel_binding']:.1f} ms SCRAM + TLS -> {path}")


if __name__ == "__main__":
    main()
