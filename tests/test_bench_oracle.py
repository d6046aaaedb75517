"""`rope-ref bench --preset oracle`: the oracle kit's costs, measured and reported."""

from __future__ import annotations

import json

from rope_ref.cli import main


def test_the_oracle_preset_measures_every_row(capsys):
    status = main(["bench", "--preset", "oracle", "--rounds", "1", "--json"])
    out = capsys.readouterr().out
    assert status == 0, out
    (result,) = json.loads(out)["results"]
    shapes = [row["shape"] for row in result["comparisons"]]
    assert shapes == [[2, 16, 4, 64], [1, 128, 8, 128], [1, 1024, 32, 128]]
    for row in result["comparisons"]:
        assert row["ratio"] == row["passing_assert_s"] / row["reference_s"] > 0
    assert result["comparisons"][1]["failing_report_s"] > 0
    assert result["property_test"]["examples"] == 200
    assert result["check"]["verdict"] == "conformant"
    assert result["check"]["examples"] == 100
