"""``grinding calibrate --fit-damping``: the coefficient of restitution from a calibration pass.

The damping force ``D d'`` acts only while the depth changes; on a position-controlled pass the
depth is steady, so c_r is not identifiable from the pass alone (core/calibration/calibrate.py). With
``--fit-damping`` the fit also takes the engagement and the dwell; a calibration plan whose
engagement is fast (``process.engage_time`` 0.05 s: the tool reaches the surface at about 20 mm/s)
shows it. A "true" cell (in process: stiffness 3x, c_r 0.3 instead of 0.5, sensor noise) runs that
plan; calibrate must recover c_r and K. Without ``--fit-damping`` c_r is kept (0.5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot_grinding_sim.cli import main
from robot_grinding_sim.core.calibration.calibrate import calibration_plan
from robot_grinding_sim.core.config import CellConfig, load_cell_config
from robot_grinding_sim.core.job.outputs import write_outputs
from robot_grinding_sim.core.job.run import run_job
from robot_grinding_sim.core.job.setup import JobConfig

K_TRUE = 3.0 * CellConfig().contact.stiffness
CR_TRUE = 0.3


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("calibrate_damping")
    fast = CellConfig().replace(**{"process.engage_time": 0.05, "process.dwell": 0.3})
    planned = run_job(JobConfig(cell=fast, max_passes=1, pass_length=0.01, optimise=False))
    write_outputs(tmp / "planned", planned, planned.summary())
    plan = calibration_plan(json.loads((tmp / "planned" / "plan.json").read_text()), planned.setup.model)
    plan_file = tmp / "calibration_plan.json"
    plan_file.write_text(json.dumps(plan))
    true = fast.replace(**{"contact.stiffness": K_TRUE, "contact.cr": CR_TRUE,
                           "ft_sensor.noise_std": [0.05] * 3 + [0.002] * 3, "ft_sensor.seed": 3})
    run = run_job(JobConfig(cell=true, plan_file=str(plan_file)))
    write_outputs(tmp / "measured", run, run.summary())
    return {"tmp": tmp, "plan": plan_file, "bag": tmp / "measured" / "bag"}


@pytest.mark.parametrize("fit", [True, False])
def test_fit_damping_recovers_the_restitution_from_a_fast_engagement(
        measured: dict[str, Path], fit: bool, capsys: pytest.CaptureFixture[str]) -> None:
    out = measured["tmp"] / f"cell_{fit}.yaml"
    capsys.readouterr()
    args = ["calibrate", str(measured["bag"]), "--plan", str(measured["plan"]), "--out", str(out), "--json"]
    assert main([*args, "--fit-damping"] if fit else args) == 0
    summary = json.loads(capsys.readouterr().out)
    ident = load_cell_config([str(out)])
    with capsys.disabled():
        print(f"\n--fit-damping {fit}: c_r {ident.contact.cr:.4f} (true {CR_TRUE}), K {ident.contact.stiffness:.6g} "
              f"(true {K_TRUE:g}); MRE on the pass {summary['mre_before']:.2%} -> {summary['mre_after']:.2%}; "
              f"{summary['simulations']} simulations")
    assert abs(ident.contact.stiffness / K_TRUE - 1) < 0.02
    assert summary["mre_after"] <= 0.0275
    if fit:
        assert abs(ident.contact.cr - CR_TRUE) < 0.03
    else:
        assert ident.contact.cr == CellConfig().contact.cr
