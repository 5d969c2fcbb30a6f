"""repro.api, the author surface: what it offers, the params class read from Repro[P], and the
declaration mistakes refused when a repro loads (one ``error:`` line, exit 2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

import repro.api
from repro.cli.main import app
from repro.core.errors import UsageError
from repro.run import catalog

PLUGIN = '''
"""Test-only plugin: two variants, one comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repro.api import Arm, Comparison, Context, Metric, Plot, Repro, Requirements, RunResult, param, register


@dataclass(frozen=True)
class TwoParams:
    n: int = param(4, help="size", smoke=2, min=1, max=100)


@register
class Two(Repro[TwoParams]):
    id = "REPRO_ID"
    title = "two variants"
    upstream = ()
    seed_claim = "synthetic"
    requires = Requirements(cuda=False, cpu_smoke=True)
    metric = Metric("t(a)/t(b)", "test", 1.5)
    headline_rule = HEADLINE_RULE
    config_keys = ("n",)
    plots = (Plot("n", x=PLOT_X, x_label="n"),)

    def variants(self, p: TwoParams) -> list[str]:
        return ["a", "b"]

    def comparisons(self, p: TwoParams) -> list[Comparison]:
        return [Comparison("main", "a", DEN, 1.5, headline=True)]

    def run(self, p: TwoParams, ctx: Context) -> RunResult:
        arms = [Arm(name, lambda: None, config={"n": p.n}, calls_per_sample=1) for name in ("a", "b")]
        return RunResult(variants=tuple(ctx.measure_paired(arms)))
'''


def _plugin(tmp_path: Path, stem: str, *, den: str = "b", plot_x: str = "n", rule: str = "first") -> Path:
    """A folder holding one plugin whose id and file are named ``stem`` (CliRunner shares one process)."""
    folder = tmp_path / stem
    folder.mkdir()
    code = PLUGIN.replace("REPRO_ID", stem.replace("_", "-"))
    code = code.replace("DEN", repr(den)).replace("PLOT_X", repr(plot_x)).replace("HEADLINE_RULE", repr(rule))
    (folder / f"{stem}.py").write_text(code)
    return folder


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120"})


def _refused(cli: CliRunner, folder: Path, rid: str, expected: str) -> None:
    """``repro list`` and ``repro run`` both exit 2 with one ``error:`` line containing ``expected``."""
    for args in (["list", "--repro-path", str(folder)], ["run", rid, "--repro-path", str(folder), "--smoke"]):
        r = cli.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.output
        assert expected in lines[0], lines[0]
    assert rid not in catalog.load()


def test_a_comparison_naming_an_undeclared_variant_is_refused_at_load(cli: CliRunner, tmp_path: Path) -> None:
    folder = _plugin(tmp_path, "bad_variant", den="bb")
    expected = "comparison 'main' names variant 'bb'; expected one of its variants: a, b"
    _refused(cli, folder, "bad-variant", expected)


def test_an_unknown_plot_key_is_refused_at_load(cli: CliRunner, tmp_path: Path) -> None:
    folder = _plugin(tmp_path, "bad_plot", plot_x="size")
    _refused(cli, folder, "bad-plot", "plot 'n' uses config key 'size'; expected one of its config_keys: n")


def test_an_unknown_headline_rule_is_refused_at_load(cli: CliRunner, tmp_path: Path) -> None:
    folder = _plugin(tmp_path, "bad_rule", rule="worstest")
    _refused(cli, folder, "bad-rule", "headline_rule 'worstest'; expected one of first, worst")


def test_a_plugin_declared_right_loads_and_runs(cli: CliRunner, tmp_path: Path) -> None:
    folder = _plugin(tmp_path, "good_two")
    args = ["run", "good-two", "--repro-path", str(folder), "--smoke", "--out", str(tmp_path / "out")]
    r = cli.invoke(app, [*args, "--budget", "0.2", "--no-collect-env"])
    assert r.exit_code == 0, r.output
    assert catalog.get("good-two").Params.__name__ == "TwoParams"  # read from Repro[TwoParams]


@dataclasses.dataclass(frozen=True)
class _OddParams:
    top: int = repro.api.param(2, help="the larger batch", min=2, max=8)


class _Odd(repro.api.Repro[_OddParams]):
    id = "test-odd-set"
    title = "t"
    upstream = ()
    seed_claim = "synthetic"
    requires = repro.api.Requirements(cuda=False)
    metric = repro.api.Metric("t", "t", 1.5)

    def variants(self, p: _OddParams) -> list[str]:
        return ["bs1", "bs2"]

    def comparisons(self, p: _OddParams) -> list[repro.api.Comparison]:
        return [repro.api.Comparison(f"bs{p.top}/bs1", f"bs{p.top}", "bs1", 1.5)]


def test_a_set_that_makes_a_comparison_name_an_undeclared_variant_is_refused_before_running() -> None:
    from repro.run.execute import RunRequest, resolve

    catalog.register(_Odd)
    try:
        catalog.load()  # the defaults (top=2) pass
        with pytest.raises(UsageError, match="comparison 'bs3/bs1' names variant 'bs3'"):
            resolve(RunRequest("test-odd-set", overrides={"top": "3"}))
    finally:
        catalog._REGISTRY.pop("test-odd-set", None)
        catalog._SOURCES.pop("test-odd-set", None)


def test_the_params_class_is_read_from_repro_p_and_an_explicit_one_still_wins() -> None:
    from repro.repros.linear_5090 import Linear5090, LinearParams

    assert Linear5090.Params is LinearParams

    class Explicit(repro.api.Repro[LinearParams]):
        Params = _OddParams

    class Inherits(Linear5090):
        pass

    assert Explicit.Params is _OddParams and Inherits.Params is LinearParams


def test_the_api_offers_what_the_catalog_repros_use_and_nothing_is_missing() -> None:
    assert {"Repro", "param", "Comparison", "Sweep", "Plot", "Arm", "register", "UsageError", "Context"} <= set(
        repro.api.__all__
    )
    assert all(hasattr(repro.api, name) for name in repro.api.__all__)
    assert len(set(repro.api.__all__)) == len(repro.api.__all__)
