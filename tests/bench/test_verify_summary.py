import json

from bench.verify_summary import summary


def test_summary_quotes_measured_predicted_and_error(tmp_path):
    path = tmp_path / "verify-7B.json"
    path.write_text(json.dumps({
        "passed": True,
        "measured": {"per_gpu_peak_bytes": 101307668480, "tokens_per_second": 13223.7},
        "predicted": {"per_gpu_peak_bytes": 102940323840, "tokens_per_second": 13565.7},
        "error_pct": {"per_gpu_peak_bytes": -1.6, "tokens_per_second": -2.5},
    }))
    line = summary(str(path), "7B")
    assert line == ("7B: passed=True peak measured 101307668480 predicted 102940323840 (-1.6%), tokens/s measured "
                    "13223.7 predicted 13565.7 (-2.5%)")


def test_summary_of_a_missing_or_empty_file(tmp_path):
    empty = tmp_path / "verify-0.5B.json"
    empty.write_text("")
    assert summary(str(empty), "0.5B") == "0.5B: verify wrote no JSON (see its log)"
    assert summary(str(tmp_path / "none.json"), "1.5B") == "1.5B: verify wrote no JSON (see its log)"
