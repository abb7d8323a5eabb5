"""The seed scenario (examples/seed_redefinition.py) on the CPU target: a kernel whose callee is redefined
between two launches prints 1, then 2 -- in a fresh process and in this one.
"""

import runpy

from helpers import ROOT, run_python

SEED = ROOT / "examples" / "seed_redefinition.py"


def test_seed_scenario_prints_1_then_2_in_a_fresh_process():
    result = run_python(SEED, env={"OVERDUB_TARGET": "cpu"}, timeout=120)
    assert result.stdout == "1\n2\n"


def test_seed_scenario_prints_1_then_2_in_process(capfd, monkeypatch):
    monkeypatch.setenv("OVERDUB_TARGET", "cpu")
    capfd.readouterr()
    runpy.run_path(str(SEED), run_name="seed_redefinition_in_process")
    assert capfd.readouterr().out == "1\n2\n"
