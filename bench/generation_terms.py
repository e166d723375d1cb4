"""Candidate terms for the step time of GRPO/RLOO generation without vLLM, fitted on the fit rows and judged on the
holdout rows and the verify bundles (docs/accuracy.md, known gaps).

The model's generation time is GENERATE_CALL_SECONDS + completion x (kernels per decode step x
DECODE_LAUNCH_SECONDS) on top of the rest of the step. Each candidate adds one feature to that linear form; all
coefficients are fitted by least squares on the relative error (weights 1 / measured) of the fit rows' generation
time (measured step - the model's non-generation part). A candidate is worth a term only when the rows it was not
fitted on get better.

    python -m bench.generation_terms
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from advisor.model import speed as S
from advisor.model.dims import dims

Feature = Callable[[dict[str, float]], float]

CANDIDATES: dict[str, list[Feature]] = {
    "none (the model's form)": [],
    "context length per decode kernel": [lambda r: r["c"] * r["K"] * r["ctx"] / 1e3],
    "context length per layer and step": [lambda r: r["c"] * r["L"] * r["ctx"] / 1e3],
    "completion length squared per layer": [lambda r: r["c"] * r["c"] * r["L"] / 1e3],
    "prompt tokens of the round per layer": [lambda r: r["g"] * r["prompt"] * r["L"] / 1e4],
    "completion length alone": [lambda r: r["c"]],
}


def generation_rows(evaluated) -> list[dict[str, Any]]:
    """The GRPO/RLOO runs with a step time, as the features the candidates use."""
    from bench.accuracy import _as_benchmarked, _prepared

    out = []
    for e, plan, target, mem in _prepared([e for e in evaluated if e.run.knobs.get("trainer") in ("grpo", "rloo")]):
        with _as_benchmarked(e.run.lora_dropout):
            spd = S.estimate_speed(e.model, plan, target, mem)
        gen = spd.breakdown["generation"]
        c = plan.max_completion_len
        out.append({
            "name": e.run.name, "split": e.run.split, "measured": e.run.step_seconds,
            "rest": spd.step_seconds - gen, "c": c, "L": dims(e.model).L, "g": plan.micro_batch * plan.grad_accum,
            "prompt": plan.seq_len - c, "ctx": plan.seq_len - c / 2,
            "K": (gen - S.GENERATE_CALL_SECONDS) / (c * S.DECODE_LAUNCH_SECONDS),
        })
    return out


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the normal equations: at most four unknowns)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        if abs(m[col][col]) < 1e-300:
            raise ValueError("singular features")
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def _features(extra: list[Feature]) -> list[Feature]:
    """The model's form (a fixed cost per round, the decode steps' kernels) and a candidate's features."""
    return [lambda r: 1.0, lambda r: r["c"] * r["K"], *extra]


def fit(rows: list[dict[str, Any]], extra: list[Feature]) -> list[float]:
    feats = _features(extra)
    x = [[f(r) / r["measured"] for f in feats] for r in rows]
    y = [(r["measured"] - r["rest"]) / r["measured"] for r in rows]
    ata = [[sum(xi[i] * xi[j] for xi in x) for j in range(len(feats))] for i in range(len(feats))]
    aty = [sum(xi[i] * yi for xi, yi in zip(x, y, strict=True)) for i in range(len(feats))]
    return _solve(ata, aty)


def predict(r: dict[str, Any], coef: list[float], extra: list[Feature]) -> float:
    return r["rest"] + sum(c * f(r) for c, f in zip(coef, _features(extra), strict=True))


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per candidate: its coefficients and the worst |error| on the fit rows, the holdout rows and the verify
    bundles."""
    train = [r for r in rows if r["split"] == "fit"]
    out = []
    for name, extra in CANDIDATES.items():
        coef = fit(train, extra)
        worst = {}
        for split in ("fit", "holdout", "verify"):
            errs = [abs(predict(r, coef, extra) / r["measured"] - 1) for r in rows if r["split"] == split]
            worst[split] = max(errs) if errs else None
        out.append({"candidate": name, "coef": coef, "worst": worst})
    return out


def main() -> int:
    from bench.accuracy import build

    rep = build()
    for c in compare(generation_rows(rep.rows + rep.verify_rows)):
        cells = ", ".join(f"{k} {100 * v:.1f} %" for k, v in c["worst"].items() if v is not None)
        print(f"{c['candidate']}: worst |err| {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
