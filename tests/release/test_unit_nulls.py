"""NULL privacy-unit ids follow ``[privacy_unit] on_null``: refused by default, or dropped
and reported on a line of their own. Never bounded together as one "person" (before, 50
NULL-id rows with ``max_rows = 4`` silently lost 46 inside the generic dropped line)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsql.cli import main
from dpsql.errors import DataError, SpecError
from dpsql.release import build_release
from dpsql.spec import ReleaseSpec

N_NULL = 50


def _write(base: Path) -> None:
    # 100 units of 2 rows each, plus 50 rows without a unit id
    uid = np.concatenate([np.repeat(np.arange(100), 2), np.zeros(N_NULL, dtype=np.int64)])
    mask = np.arange(uid.size) >= 200
    mode = np.array(["car", "bus"] * (uid.size // 2))
    pq.write_table(pa.table({"uid": pa.array(uid, mask=mask), "mode": mode}),
                   base / "t.parquet")


def _spec(base: Path, **unit) -> dict:
    return {
        "name": "nulls", "source": "t.parquet", "neighbouring": "add_remove",
        "budget": {"rho": 1e6},
        "privacy_unit": {"column": "uid", "max_rows": 4, **unit},
        "attributes": {"mode": {"kind": "categorical", "domain": ["car", "bus"]}},
        "views": [{"name": "modes", "levels": ["mode"], "mechanism": "inftda"}],
    }


def test_null_unit_ids_are_refused_by_default(tmp_path):
    _write(tmp_path)
    spec = ReleaseSpec.from_dict(_spec(tmp_path), base_dir=tmp_path)
    assert spec.unit.on_null == "error"
    with pytest.raises(DataError, match=r"'uid' has 50 NULL value\(s\).*on_null = \"drop\""):
        build_release(spec, tmp_path / "r.duckdb", seed=1, progress=False)
    assert not (tmp_path / "r.duckdb").exists()


def test_drop_drops_every_null_row_and_reports_it_on_its_own(tmp_path):
    _write(tmp_path)
    spec = ReleaseSpec.from_dict(_spec(tmp_path, on_null="drop"), base_dir=tmp_path)
    release = build_release(spec, tmp_path / "r.duckdb", seed=1, progress=False)
    report = release.report
    assert report.rows_read == 250 and report.rows_used == 200
    assert report.null_units == N_NULL
    assert ("uid", "dropped (NULL privacy-unit id)", N_NULL) in report.actions
    # nothing was bounded away (every real unit has 2 <= max_rows rows): no generic line
    assert not any("rows per unit" in action for _, action, _ in report.actions)
    # the policy round-trips through the stored spec
    assert ReleaseSpec.from_dict(spec.to_dict()).unit.on_null == "drop"


def test_the_cli_prints_the_null_line_apart_from_the_bounding_line(tmp_path, capsys):
    _write(tmp_path)
    toml = tmp_path / "s.toml"
    toml.write_text(
        'name = "nulls"\nsource = "t.parquet"\nneighbouring = "add_remove"\n'
        '[privacy_unit]\ncolumn = "uid"\nmax_rows = 1\non_null = "drop"\n'
        '[budget]\nrho = 1.0\n[attributes.mode]\nkind = "categorical"\n'
        'domain = ["car", "bus"]\n[[views]]\nname = "modes"\nlevels = ["mode"]\n')
    assert main(["release", str(toml), "-o", str(tmp_path / "r.duckdb"), "--seed", "1",
                 "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip() == "uid: 50 row(s) dropped (NULL privacy-unit id)"
               for line in lines)
    assert any(line.strip() == "uid: 100 row(s) dropped (more than 1 rows per unit)"
               for line in lines)


def test_an_unknown_policy_names_the_key(tmp_path):
    with pytest.raises(SpecError, match=r"privacy_unit\.on_null: unknown policy 'keep'"):
        ReleaseSpec.from_dict(_spec(tmp_path, on_null="keep"), base_dir=tmp_path)
