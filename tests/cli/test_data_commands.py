"""``foxhunt data inspect``: the load report without training, and errors whose --set hints work as pasted."""

from __future__ import annotations

import json
import re
import shlex

from foxhunt.cli.common import EXIT_USER_ERROR

FRED = "DATE,SP500\n2017-01-02,.\n2017-01-03,2257.83\n2017-01-04,2270.75\n2017-01-05,2269.00\n"
TWO_SERIES = "DATE,SP500,NASDAQCOM\n2017-01-03,2257.83,5429.08\n2017-01-04,2270.75,5477.00\n2017-01-05,2269.00,5487.94\n"


def test_inspect_prints_layout_columns_times_frequency_and_dropped_rows(run, tmp_path):
    path = tmp_path / "SP500.csv"
    path.write_text(FRED)
    result = run("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "layout: CSV with a header, close-only series" in out
    assert "columns: time <- 'DATE', close <- 'SP500'" in out
    assert "read as UTC (data.timezone)" in out
    assert "frequency: 1d" in out
    assert "rows: 4 read, 3 kept, 1 dropped" in out
    assert "bars: 3, 2017-01-03T00:00:00.000000000 to 2017-01-05T00:00:00.000000000" in out


def test_inspect_takes_set_overrides_like_train(run, tmp_path):
    path = tmp_path / "SP500.csv"
    path.write_text(FRED)
    result = run("data", "inspect", str(path), "--set", "data.timezone=America/New_York", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["start"] == "2017-01-03T05:00:00.000000000"  # midnight in New York
    assert report["missing_dropped"] == [1]
    assert report["columns"] == {"time": "DATE", "close": "SP500"}


def test_an_ambiguous_file_is_one_paragraph_whose_set_hint_works_as_pasted(run, tmp_path):
    path = tmp_path / "fred2.csv"
    path.write_text(TWO_SERIES)
    refused = run("data", "inspect", str(path))
    assert refused.exit_code == EXIT_USER_ERROR
    assert "Traceback" not in refused.output and refused.stderr.count("\n") == 1
    hint = re.search(r"--set '[^']*'", refused.stderr).group(0)
    assert hint == """--set 'data.columns={close="SP500"}'"""
    loaded = run("data", "inspect", str(path), *shlex.split(hint))
    assert loaded.exit_code == 0, loaded.output
    assert "close <- 'SP500'" in loaded.stdout


def test_help_teaches_with_examples(run):
    result = run("data", "inspect", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert "foxhunt data inspect SP500.csv" in result.stdout
    assert "--set 'data.columns={close=\"Adj Close\"}'" in result.stdout
    assert "data" in run("--help").stdout
