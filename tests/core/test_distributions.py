"""The decision's own distribution functions against scipy.stats (their reference)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.core.distributions import binom_ppf, norm_isf, norm_ppf, norm_sf, t_isf, t_ppf, t_sf
from perfgate.core.stability import theil_sen


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 7, 10, 30, 101, 500, 999, None])
def test_t_tails_and_quantiles_match_scipy_stats(df: int | None) -> None:
    dist = sps.t(df) if df is not None else sps.norm
    for x in (-40.0, -8.0, -2.5, -0.3, 0.0, 1e-3, 0.4, 1.96, 3.5, 12.0, 45.0):
        assert t_sf(x, df) == pytest.approx(float(dist.sf(x)), rel=1e-10, abs=1e-300)
    for q in (1e-9, 2e-6, 0.005, 0.025, 0.3, 0.5, 0.8, 0.975, 0.995, 1 - 1e-7):
        assert t_ppf(q, df) == pytest.approx(float(dist.ppf(q)), rel=1e-9)
        assert t_isf(q, df) == pytest.approx(float(dist.isf(q)), rel=1e-9)


def test_normal_functions_match_scipy_stats() -> None:
    for x in (-6.0, -1.0, 0.0, 0.5, 2.0, 7.0):
        assert norm_sf(x) == pytest.approx(float(sps.norm.sf(x)), rel=1e-12, abs=1e-300)
    for q in (1e-9, 0.01, 0.5, 0.8, 0.975):
        assert norm_ppf(q) == pytest.approx(float(sps.norm.ppf(q)), rel=1e-12)
        assert norm_isf(q) == pytest.approx(float(sps.norm.isf(q)), rel=1e-12)


def test_binomial_quantile_equals_scipy_stats_on_every_rank_the_intervals_use() -> None:
    """The order-statistic ranks of every interval from 1 to 400 samples (and a few large n)."""
    for n in [*range(1, 401), 1000, 4999, 100_000]:
        for p in (0.5, 0.95, 0.99):
            for q in (0.005, 0.025, 0.05, 0.95, 0.975, 0.995):
                assert binom_ppf(q, n, p) == int(sps.binom.ppf(q, n, p)), (n, p, q)


def test_binomial_quantile_edges() -> None:
    assert binom_ppf(0.0, 10, 0.5) == int(sps.binom.ppf(0.0, 10, 0.5))
    assert binom_ppf(1.0, 10, 0.5) == 10
    assert binom_ppf(1e-12, 3, 0.99) == int(sps.binom.ppf(1e-12, 3, 0.99))


def test_theil_sen_matches_scipy_stats_with_ties() -> None:
    rng = np.random.default_rng(4)
    for n in (3, 4, 10, 60, 300):
        x = np.arange(n, dtype=float)
        y = np.round(rng.normal(size=n) * 2) / 2 + 0.02 * x  # rounded: ties in y
        ref = sps.theilslopes(y, x, alpha=0.95)
        slope, low, high = theil_sen(y, x, 0.95)
        assert slope == pytest.approx(float(ref[0]), rel=1e-12, abs=1e-15)
        for mine, theirs in ((low, ref[2]), (high, ref[3])):
            assert (math.isnan(mine) and math.isnan(theirs)) or mine == pytest.approx(float(theirs), rel=1e-12)


def test_check_path_never_imports_scipy() -> None:
    """Regression for the slow start: scipy.stats cost most of a second to import, scipy.special a third."""
    import subprocess
    import sys

    code = (
        "import sys, perfgate.core.compare, perfgate.core.paired, perfgate.core.stability; "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = "import sys, perfgate.core.compare, perfgate.core.paired; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_threshold_only_check_never_imports_scipy() -> None:
    """One sample per side (the flat single-number format): no test runs, so no scipy is loaded."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from perfgate.core.compare import compare_runs\n"
        "from perfgate.core.metrics import Direction\n"
        "from perfgate.core.policy import Policy\n"
        "from perfgate.core.schema import Metric, Run\n"
        "def run(v):\n"
        "    m = Metric(name='training_step_time_ms', unit='ms', direction=Direction.LOWER, samples=(v,))\n"
        "    return Run(model='dqn', metrics={m.name: m})\n"
        "result = compare_runs(run(100.0), run(120.0), Policy())\n"
        "print(result.exit_code, 'scipy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]
