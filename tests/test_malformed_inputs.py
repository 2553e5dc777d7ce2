"""A corpus of malformed inputs (specs, spec/spine/domain files, sources, budgets, outputs,
SQL): each must get one ``dpsql.Error`` whose message is one line naming the problem,
through the Python API and through the CLI, never a traceback.

The CLI side runs every case in one subprocess that calls ``dpsql.cli.main`` once per
case and reports what each printed on stderr (a traceback included, were one to
escape): one interpreter start instead of a hundred. A few cases also run as real
``python -m dpsql.cli`` processes, the path a user takes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

BASE = """\
name = "corpus"
source = "t.parquet"
neighbouring = "add_remove"

[privacy_unit]
column = "uid"
max_rows = 3

[budget]
rho = 1.0

[attributes.mode]
kind = "categorical"
domain = ["car", "bus", "walk"]

[attributes.geo]
kind = "hierarchy"
columns = ["region", "city"]
spine_file = "geo.csv"

[attributes.distance]
kind = "range"
lower = 0
upper = 64
bins = 16

[[views]]
name = "v1"
levels = ["geo", "mode"]

[[views]]
name = "v2"
levels = ["distance"]
mechanism = "cascade"
"""

GEO = "region,city\nN,a\nN,b\nS,c\n"


def _edit(old: str, new: str):
    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return apply


def _append(extra: str):
    return lambda text: text + extra


def _source(name: str, **cols):
    """A case whose source is the table ``cols`` written as ``name``."""
    def write(base: Path) -> None:
        pq.write_table(pa.table(cols), base / name)
    return write


def _file(name: str, data: bytes):
    return lambda base: (base / name).write_bytes(data)


GOOD_COLS = dict(uid=[1, 2, 3], mode=["car", "bus", "walk"], region=["N", "N", "S"],
                 city=["a", "b", "c"], distance=[1.0, 2.0, 3.0])

# id -> (spec edit, files to write, regex the one-line message must match)
SPEC_CASES: dict[str, tuple] = {
    # budgets
    "rho inf": (_edit("rho = 1.0", "rho = inf"), None, r"budget\.rho: must be a finite"),
    "rho -inf": (_edit("rho = 1.0", "rho = -inf"), None, r"budget\.rho: must be a finite"),
    "rho nan": (_edit("rho = 1.0", "rho = nan"), None, r"budget\.rho: must be a finite"),
    "rho negative": (_edit("rho = 1.0", "rho = -1"), None, r"budget\.rho: must be > 0, got -1;"),
    "rho zero": (_edit("rho = 1.0", "rho = 0"), None, r"budget\.rho: must be > 0, got 0;"),
    "rho 1e-300": (_edit("rho = 1.0", "rho = 1e-300"), None, r"usable range: .* <= rho <="),
    "rho 1e308": (_edit("rho = 1.0", "rho = 1e308"), None, r"usable range: .* <= rho <="),
    "rho text": (_edit("rho = 1.0", 'rho = "abc"'), None, r"budget\.rho: must be a number"),
    "rho bool": (_edit("rho = 1.0", "rho = true"), None, r"budget\.rho: must be a number"),
    "rho huge int": (_edit("rho = 1.0", "rho = 9223372036854775807"), None,
                     r"usable range"),
    "rho too small for a view": (_edit("rho = 1.0", "rho = 1e-28"), None,
                                 r"views: 'v1' .*beyond .* samplers stop being exact"),
    "pure epsilon, gaussian": (_edit("rho = 1.0", "epsilon = 1.0"), None,
                               r"adds Gaussian noise"),
    "delta one": (_edit("rho = 1.0", "epsilon = 1.0\ndelta = 1"), None,
                  r"budget\.delta: must be in \(0, 1\), got 1;"),
    "delta zero": (_edit("rho = 1.0", "epsilon = 1.0\ndelta = 0"), None,
                   r"budget\.delta: must be in \(0, 1\), got 0;"),
    "delta inf": (_edit("rho = 1.0", "epsilon = 1.0\ndelta = inf"), None,
                  r"budget\.delta: must be a finite"),
    "epsilon 1e7": (_edit("rho = 1.0", "epsilon = 1e7\ndelta = 1e-9"), None,
                    r"usable range: .* <= epsilon <="),
    "epsilon 1e-20": (_edit("rho = 1.0", "epsilon = 1e-20\ndelta = 1e-9"), None,
                      r"usable range"),
    "rho and epsilon": (_edit("rho = 1.0", "rho = 1.0\nepsilon = 1.0"), None,
                        r"give rho alone"),
    "empty budget": (_edit("rho = 1.0", ""), None, r"budget: give exactly one of"),
    "budget unknown key": (_edit("rho = 1.0", "rho = 1.0\nsigma = 2"), None,
                           r"budget\.sigma: unknown key"),
    # attributes
    "upper inf": (_edit("upper = 64", "upper = inf"), None,
                  r"attributes\.distance\.upper: must be a finite"),
    "lower nan": (_edit("lower = 0", "lower = nan"), None,
                  r"attributes\.distance\.lower: must be a finite"),
    "lower above upper": (_edit("upper = 64", "upper = -5"), None, r"must be < upper"),
    "bounds overflow": (_edit("lower = 0\nupper = 64", "lower = -1e308\nupper = 1e308"),
                        None, r"overflows a float"),
    "bins zero": (_edit("bins = 16", "bins = 0"), None, r"bins: must be an integer >= 1"),
    "bins fractional": (_edit("bins = 16", "bins = 1.5"), None,
                        r"bins: must be an integer >= 1"),
    "bins too many": (_edit("bins = 16", "bins = 100000000"), None,
                      r"more than dpsql supports"),
    "width and bins": (_edit("bins = 16", "bins = 16\nwidth = 4"), None,
                       r"give exactly one of 'bins'"),
    "width inf": (_edit("bins = 16", "width = inf"), None, r"width: must be a finite"),
    "fanout one": (_edit("bins = 16", "bins = 16\nfanout = 1"), None,
                   r"fanout: must be 'auto' or an integer >= 2"),
    "unknown kind": (_edit('kind = "range"', 'kind = "blob"'), None, r"unknown kind 'blob'"),
    "empty domain": (_edit('domain = ["car", "bus", "walk"]', "domain = []"), None,
                     r"domain: must be a non-empty list"),
    "mixed domain": (_edit('domain = ["car", "bus", "walk"]', 'domain = ["car", 1]'), None,
                     r"mixes strings and numbers"),
    "duplicate domain": (_edit('domain = ["car", "bus", "walk"]',
                               'domain = ["car", "car"]'), None, r"duplicate domain value"),
    "inf in domain": (_edit('domain = ["car", "bus", "walk"]', "domain = [1.0, inf]"), None,
                      r"must be finite"),
    "bad bounds policy": (_edit("bins = 16", 'bins = 16\non_out_of_bounds = "wrap"'), None,
                          r"on_out_of_bounds: unknown policy 'wrap'"),
    "bad null policy": (_edit("bins = 16", 'bins = 16\non_null = "ignore"'), None,
                        r"on_null: unknown policy 'ignore'"),
    "no spine columns": (_edit('columns = ["region", "city"]', "columns = []"), None,
                         r"columns: must list the spine's columns"),
    "bad attribute name": (_edit("[attributes.mode]", '[attributes."1mode"]'), None,
                           r"'1mode' is not a valid name"),
    "unknown attribute key": (_edit("bins = 16", "bins = 16\ncolour = 1"), None,
                              r"attributes\.distance\.colour: unknown key"),
    # views
    "unknown level": (_edit('levels = ["geo", "mode"]', 'levels = ["nope"]'), None,
                      r"views\[0\]\.levels\[0\]: unknown attribute 'nope'"),
    "unknown mechanism": (_edit('mechanism = "cascade"', 'mechanism = "magic"'), None,
                          r"unknown mechanism 'magic'"),
    "weight zero": (_edit('levels = ["geo", "mode"]', 'levels = ["geo", "mode"]\nweight = 0'),
                    None, r"weight: must be > 0"),
    "weight inf": (_edit('levels = ["geo", "mode"]', 'levels = ["geo", "mode"]\nweight = inf'),
                   None, r"weight: must be a finite"),
    "covariance on inftda": (_edit('levels = ["geo", "mode"]',
                                   'levels = ["geo", "mode"]\ncovariance = "optimal"'), None,
                             r"only the cascade mechanism takes a covariance"),
    "duplicate view": (_edit('name = "v2"', 'name = "v1"'), None, r"duplicate table name 'v1'"),
    "no levels": (_edit('levels = ["geo", "mode"]', "levels = []"), None,
                  r"levels: must list the attribute names"),
    "interleave text": (_edit('levels = ["geo", "mode"]',
                              'levels = ["geo", "mode"]\ninterleave = "yes"'), None,
                        r"interleave: must be true or false"),
    "cascade two levels": (_edit('levels = ["distance"]', 'levels = ["mode", "distance"]'),
                           None, r"answers range queries over one range attribute"),
    "level weights negative": (_edit('levels = ["geo", "mode"]',
                                     'levels = ["geo", "mode"]\nlevel_weights = [1, -1]'),
                               None, r"every weight must be > 0"),
    # top level
    "no neighbouring": (_edit('neighbouring = "add_remove"\n', ""), None,
                        r"neighbouring: missing"),
    "bad neighbouring": (_edit('"add_remove"', '"sideways"'), None, r"neighbouring: "),
    "unknown top key": (_edit('name = "corpus"', 'name = "corpus"\nowner = "me"'), None,
                        r"owner: unknown key"),
    "no source": (_edit('source = "t.parquet"\n', ""), None, r"give exactly one of 'source'"),
    "source and sql": (_edit('source = "t.parquet"', 'source = "t.parquet"\nsql = "SELECT 1"'),
                       None, r"give exactly one of 'source'"),
    "reserved name": (_edit('name = "corpus"', 'name = "dpsql_x"'), None, r"reserved by dpsql"),
    "max_rows zero": (_edit("max_rows = 3", "max_rows = 0"), None,
                      r"privacy_unit\.max_rows: must be an integer >= 1"),
    "unit null policy": (_edit("max_rows = 3", 'max_rows = 3\non_null = "keep"'), None,
                         r"privacy_unit\.on_null: unknown policy 'keep'"),
    "unit unknown key": (_edit("max_rows = 3", "max_rows = 3\nsalt = 1"), None,
                         r"privacy_unit\.salt: unknown key"),
    "report_delta two": (_edit('name = "corpus"', 'name = "corpus"\nreport_delta = 2'), None,
                         r"report_delta: must be in \(0, 1\)"),
    "report_delta inf": (_edit('name = "corpus"', 'name = "corpus"\nreport_delta = inf'),
                         None, r"report_delta"),
    # spine and domain files
    "spine not utf-8": (None, _file("geo.csv", b"region,city\nN,\xff\xfe\n"),
                        r"spine_file: '.*geo\.csv' is not UTF-8 text \(byte 0xff at line 2\)"),
    "spine missing": (_edit('spine_file = "geo.csv"', 'spine_file = "nope.csv"'), None,
                      r"spine_file: file '.*nope\.csv' does not exist"),
    "spine is a folder": (_edit('spine_file = "geo.csv"', 'spine_file = "."'), None,
                          r"spine_file: cannot read"),
    "spine no column": (None, _file("geo.csv", b"region,town\nN,a\n"),
                        r"the spine file has no column 'city'"),
    "spine short row": (None, _file("geo.csv", b"region,city\nN,a\nS\n"),
                        r"line 3 of '.*geo\.csv' has 1 field\(s\)"),
    "spine empty": (None, _file("geo.csv", b""), r"the spine file has no column 'region'"),
    "spine header only": (None, _file("geo.csv", b"region,city\n"), r"the spine is empty"),
    "spine two parents": (None, _file("geo.csv", b"region,city\nN,a\nS,a\n"),
                          r"city 'a' appears under two parents"),
    "spine duplicate": (None, _file("geo.csv", b"region,city\nN,a\nN,a\n"),
                        r"duplicate leaf path"),
    "spine bad csv": (None, _file("geo.csv", b'region,city\nN,"a\n'),
                      r"spine_file: '.*geo\.csv' is not valid CSV"),
    "domain file not utf-8": (_edit('domain = ["car", "bus", "walk"]',
                                    'domain_file = "modes.csv"'),
                              _file("modes.csv", b"car\nb\xe9s\n"), r"is not UTF-8 text"),
    "domain file empty": (_edit('domain = ["car", "bus", "walk"]', 'domain_file = "modes.csv"'),
                          _file("modes.csv", b""), r"domain_file: file '.*' is empty"),
    "domain file missing": (_edit('domain = ["car", "bus", "walk"]',
                                  'domain_file = "none.csv"'), None, r"does not exist"),
    # sources
    "source missing": (_edit('"t.parquet"', '"gone.parquet"'), None,
                       r"source: file '.*gone\.parquet' does not exist"),
    "source extension": (_edit('"t.parquet"', '"t.xlsx"'), _file("t.xlsx", b"x"),
                         r"cannot read 't\.xlsx'"),
    "source corrupt parquet": (_edit('"t.parquet"', '"bad.parquet"'),
                               _file("bad.parquet", b"PAR1 not really"),
                               r"cannot read the source: "),
    "source csv not utf-8": (_edit('"t.parquet"', '"bad.csv"'),
                             _file("bad.csv", b"uid,mode,region,city,distance\n1,\xff\xfe,N,a,1\n"),
                             r"cannot read the source: .*not utf-8"),
    "source json garbage": (_edit('"t.parquet"', '"bad.json"'), _file("bad.json", b"{{{"),
                            r"cannot read the source: "),
    "source folder": (_edit('"t.parquet"', '"sub.parquet"'),
                      lambda base: (base / "sub.parquet").mkdir(), r"cannot read the source"),
    "source empty": (_edit('"t.parquet"', '"e.parquet"'),
                     _source("e.parquet", **{k: pa.array([], type=pa.array(v).type)
                                            for k, v in GOOD_COLS.items()}),
                     r"the source has no rows"),
    "source lacks column": (_edit('"t.parquet"', '"s.parquet"'),
                            _source("s.parquet", **{k: v for k, v in GOOD_COLS.items()
                                                   if k != "mode"}),
                            r"the source has no column 'mode'"),
    "source NULL attribute": (_edit('"t.parquet"', '"s.parquet"'),
                              _source("s.parquet", **{**GOOD_COLS,
                                                      "mode": ["car", None, "bus"]}),
                              r"attribute 'mode' has 1 NULL value\(s\)"),
    "source out of domain": (_edit('"t.parquet"', '"s.parquet"'),
                             _source("s.parquet", **{**GOOD_COLS,
                                                     "mode": ["car", "tram", "bus"]}),
                             r"outside its public domain, e\.g\. 'tram'"),
    "source not in spine": (_edit('"t.parquet"', '"s.parquet"'),
                            _source("s.parquet", **{**GOOD_COLS, "city": ["a", "z", "c"]}),
                            r"not in the public spine"),
    "source NULL unit": (_edit('"t.parquet"', '"s.parquet"'),
                         _source("s.parquet", **{**GOOD_COLS, "uid": [1, None, 3]}),
                         r"privacy unit column 'uid' has 1 NULL value\(s\)"),
    "source text range": (_edit('"t.parquet"', '"s.parquet"'),
                          _source("s.parquet", **{**GOOD_COLS, "distance": ["1", "2", "3"]}),
                          r"range attribute 'distance' must be numeric"),
    "source NaN range": (_edit('"t.parquet"', '"s.parquet"'),
                         _source("s.parquet", **{**GOOD_COLS,
                                                 "distance": [1.0, float("nan"), 3.0]}),
                         r"NaN value\(s\)"),
    "source out of bounds": (_edit("bins = 16", 'bins = 16\non_out_of_bounds = "error"'),
                             _source("t.parquet", **{**GOOD_COLS,
                                                     "distance": [1.0, 99.0, 3.0]}),
                             r"outside \[0, 64\)"),
    "duckdb source form": (_edit('"t.parquet"', '"duckdb:x.duckdb"'), None,
                           r"is not of the form 'duckdb:<file>:<table>'"),
    "duckdb source missing": (_edit('"t.parquet"', '"duckdb:x.duckdb:t"'), None,
                              r"DuckDB file '.*x\.duckdb' does not exist"),
    "duckdb source not duckdb": (_edit('"t.parquet"', '"duckdb:x.duckdb:t"'),
                                 _file("x.duckdb", b"not a database"),
                                 r"cannot read the source: "),
    "sql source syntax": (_edit('source = "t.parquet"', 'sql = "SELEC nonsense"'), None,
                          r"cannot read the source: .*syntax error"),
    "sql source deep": (_edit('source = "t.parquet"',
                              'sql = "SELECT * FROM ' + "(" * 3000 + "SELECT 1" + ")" * 3000
                              + '"'), None, r"the source has no column 'mode'"),
}

FILE_CASES = {  # the spec file itself
    "spec not utf-8": (b'name = "caf\xe9"\n', r"spec file: '.*' is not UTF-8 text"),
    "spec malformed toml": (b"name = \n", r"malformed TOML"),
    "spec empty": (b"", r"name: None is not a valid name"),
    "spec binary": (b"\x00\x01\x02", r"malformed TOML"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Every spec case written to its own folder: id -> (spec path, message regex)."""
    root = tmp_path_factory.mktemp("corpus")
    g = np.random.default_rng(1)
    n = 300
    table = pa.table({"uid": g.integers(0, 100, n), "mode": g.choice(["car", "bus", "walk"], n),
                      "region": ["N"] * n, "city": g.choice(["a", "b"], n),
                      "distance": g.uniform(0, 64, n)})
    out: dict[str, tuple[Path, str]] = {}
    for i, (case, (edit, write, pattern)) in enumerate(SPEC_CASES.items()):
        base = root / f"c{i:03d}"
        base.mkdir()
        pq.write_table(table, base / "t.parquet")
        (base / "geo.csv").write_text(GEO)
        if write is not None:
            write(base)
        (base / "s.toml").write_text(edit(BASE) if edit else BASE)
        out[case] = (base / "s.toml", pattern)
    for i, (case, (data, pattern)) in enumerate(FILE_CASES.items()):
        base = root / f"f{i:03d}"
        base.mkdir()
        (base / "s.toml").write_bytes(data)
        out[case] = (base / "s.toml", pattern)
    missing = root / "nowhere" / "s.toml"
    out["spec missing"] = (missing, r"spec file '.*' does not exist")
    folder = root / "folder.toml"
    folder.mkdir()
    out["spec is a folder"] = (folder, r"spec file: cannot read")
    good = root / "good"
    good.mkdir()
    pq.write_table(table, good / "t.parquet")
    (good / "geo.csv").write_text(GEO)
    (good / "s.toml").write_text(BASE)
    (good / "blocker").write_text("a file, not a folder")
    out["output under a file"] = (good / "s.toml", r"cannot write the release into .*blocker")
    return out


def _output(spec: Path, case: str) -> Path:
    if case == "output under a file":
        return spec.parent / "blocker" / "r.duckdb"
    return spec.parent / "r.duckdb"


def _one_line(message: str, pattern: str) -> None:
    assert "\n" not in message.strip(), message
    assert "Traceback" not in message
    assert re.search(pattern, message), (pattern, message)


BUILD_CASES = [*SPEC_CASES, *FILE_CASES, "spec missing", "spec is a folder",
               "output under a file"]


@pytest.mark.parametrize("case", BUILD_CASES)
def test_python_api(corpus, case):
    spec_path, pattern = corpus[case]
    with pytest.raises(dpsql.Error) as info:
        spec = ReleaseSpec.from_toml(spec_path)
        build_release(spec, _output(spec_path, case), seed=1, progress=False)
    _one_line(str(info.value), pattern)
    assert not _output(spec_path, case).exists()


SQL_CASES = {
    "3000 parentheses": ("SELECT COUNT(*) FROM corpus WHERE " + "(" * 3000 + "mode = 'car'"
                         + ")" * 3000, r"nested too deeply .*recursion limit"),
    "2000 nested CASE": ("SELECT " + "CASE WHEN 1 = 1 THEN " * 2000 + "1" + " END" * 2000,
                         r"nested too deeply"),
    "2000 nested OR": ("SELECT COUNT(*) FROM corpus WHERE " + "(mode = 'car' OR " * 2000
                       + "mode = 'bus'" + ")" * 2000, r"nested too deeply"),
    "20000 ANDs": ("SELECT COUNT(*) FROM corpus WHERE "
                   + " AND ".join(["mode = 'car'"] * 20000), r"nested too deeply"),
    "syntax error": ("SELEC COUNT(*) FROM corpus", r"syntax error"),
    "empty": ("   ", r"empty query"),
    "select star": ("SELECT * FROM corpus", r"SELECT \* on the private table"),
    "ddl": ("DROP TABLE corpus", r"not supported"),
    "two statements": ("SELECT 1; SELECT 2", r"2 statements given"),
    "unknown column": ("SELECT colour, COUNT(*) FROM corpus GROUP BY colour", r"colour"),
    "lone surrogate": ("SELECT COUNT(*) FROM corpus WHERE mode = '\udcff'", r"UTF-8"),
}


@pytest.fixture(scope="module")
def release(corpus) -> Path:
    spec = corpus["output under a file"][0]
    out = spec.parent / "release.duckdb"
    build_release(ReleaseSpec.from_toml(spec), out, progress=False)  # unseeded: no warning
    return out


@pytest.mark.parametrize("case", list(SQL_CASES))
def test_sql_through_the_dbapi(release, case):
    sql, pattern = SQL_CASES[case]
    con = dpsql.connect(str(release))
    with con, pytest.raises(dpsql.Error) as info:
        con.cursor().execute(sql)
    _one_line(str(info.value), pattern)


DRIVER = textwrap.dedent("""
    import contextlib, io, json, sys, traceback, warnings
    warnings.simplefilter("ignore")
    from dpsql.cli import main
    results = []
    for argv in json.load(sys.stdin):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main(argv)
            except BaseException:  # what would have escaped as a traceback
                traceback.print_exc()
                rc = "escaped"
        results.append({"rc": rc, "stderr": err.getvalue()})
    print(json.dumps(results))
""")


def _cli_argvs(corpus, release) -> list[tuple[str, list[str], str]]:
    cases = []
    for case in BUILD_CASES:
        spec, pattern = corpus[case]
        cases.append((case, ["release", str(spec), "-o", str(_output(spec, case)), "-q",
                             "--seed", "1"], pattern))
    for case, (sql, pattern) in SQL_CASES.items():
        cases.append((f"sql: {case}", ["query", str(release), sql], pattern))
    cases += [
        ("query missing release", ["query", str(release.parent / "none.duckdb"),
                                   "SELECT 1"], r"does not exist"),
        ("query not a release", ["query", str(corpus["output under a file"][0]), "SELECT 1"],
         r"is a release spec, not a release: build the release first"),
        ("query bad --ci", ["query", str(release), "SELECT COUNT(*) FROM corpus", "--ci",
                            "1.5"], r"--ci 1\.5: the confidence must lie strictly"),
        ("query extra parameter", ["query", str(release), "SELECT COUNT(*) FROM corpus",
                                   "-p", "1"], r"parameter"),
        ("release over an existing file", ["release", str(corpus["output under a file"][0]),
                                           "-o", str(release), "-q"],
         r"already exists; replacing a release spends the privacy budget again"),
        ("inspect not a release", ["inspect", str(corpus["output under a file"][0])],
         r"is a release spec, not a release: build the release first"),
    ]
    return cases


def test_cli_one_line_and_no_traceback(corpus, release):
    cases = _cli_argvs(corpus, release)
    assert len(cases) >= 80
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(
        [argv for _, argv, _ in cases]), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = []
    for (case, _, pattern), res in zip(cases, results):
        text = res["stderr"].strip()
        ok = (res["rc"] == 1 and text.startswith("error: ") and "\n" not in text
              and "Traceback" not in text and re.search(pattern, " ".join(text.split())))
        if not ok:
            bad.append((case, res["rc"], text[:300]))
    assert not bad, bad


@pytest.mark.parametrize("case", ["rho inf", "spec not utf-8", "upper inf"])
def test_the_real_command_prints_one_line(corpus, case):
    spec, pattern = corpus[case]
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "release", str(spec), "-o",
                           str(spec.parent / "r.duckdb"), "-q"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    _one_line(proc.stderr.strip(), pattern)


def test_deep_sql_through_the_real_command(release):
    sql = SQL_CASES["3000 parentheses"][0]  # 20,000 ANDs is too long for one argv entry
    proc = subprocess.run([sys.executable, "-m", "dpsql.cli", "query", str(release), sql],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    text = " ".join(proc.stderr.split("warning:")[-1].split())
    assert re.search(r"error: the query is nested too deeply", " ".join(proc.stderr.split()))
    assert text
