"""bench/generation_terms.py: the least-squares fit and the candidate comparison the accuracy report quotes."""

from __future__ import annotations

import pytest

from bench import accuracy as A
from bench import generation_terms as GT


def test_solve_gives_the_exact_solution_of_a_small_system():
    a = [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]
    x = [1.0, -2.0, 0.5]
    b = [sum(ai * xi for ai, xi in zip(row, x, strict=True)) for row in a]
    assert GT._solve(a, b) == pytest.approx(x)


def test_fit_recovers_coefficients_of_rows_made_from_them():
    rows = [{"c": c, "K": k, "rest": 0.2, "measured": 0.2 + 0.4 + c * k * 1.5e-5, "split": "fit"}
            for c, k in ((48, 1200), (128, 1500), (256, 1900), (512, 1300))]
    coef = GT.fit(rows, [])
    assert coef == pytest.approx([0.4, 1.5e-5], rel=1e-6)
    assert all(GT.predict(r, coef, []) == pytest.approx(r["measured"]) for r in rows)


@pytest.fixture(scope="module")
def compared():
    rep = A.build()
    return GT.compare(GT.generation_rows([e for e in rep.rows + rep.verify_rows if e.run.status == "ok"]))


def test_every_candidate_is_judged_on_rows_it_was_not_fitted_on(compared):
    assert [c["candidate"] for c in compared] == list(GT.CANDIDATES)
    assert all(c["worst"]["holdout"] is not None and c["worst"]["verify"] is not None for c in compared)
    # the report says none is added: none beats the model's form on the holdout rows by more than 1 point
    base = compared[0]["worst"]["holdout"]
    assert all(c["worst"]["holdout"] > base - 0.01 for c in compared[1:])


def test_the_report_quotes_the_comparison(compared):
    text = (A.REPO / A.DOC).read_text()
    for c in compared[1:]:
        assert f"{c['candidate']} {100 * c['worst']['holdout']:.1f}%" in text
