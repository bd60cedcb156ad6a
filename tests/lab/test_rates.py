"""lab.rates: the one learning-rate check and the one sweep length that `lab.train`, `witness train` and
`witness capacity` share."""

import math
import re
import subprocess
import sys

import pytest

from lab.rates import check_rate, sweep_steps
from tests import REPO
from witness.errors import ParameterError

#: Not a learning rate, each for its own reason: a bool (Python's int subclass: True would train at rate 1),
#: non-finite, zero, negative, not a number at all.
NOT_RATES = [True, False, math.nan, math.inf, -math.inf, 0, 0.0, -1e-3, "1e-3", None]


@pytest.mark.parametrize("steps, each", [(1, 1), (3, 1), (4, 1), (7, 1), (8, 2), (20, 5), (4000, 1000),
                                         (16001, 4000)])
def test_a_sweep_trial_trains_a_quarter_of_the_run_and_at_least_one_step(steps, each):
    assert sweep_steps(steps) == each


@pytest.mark.parametrize("rate", NOT_RATES)
def test_what_is_not_a_learning_rate_is_refused_naming_the_field_and_the_value(rate):
    with pytest.raises(ParameterError, match=re.escape(f"lr_sweep: a learning rate must be a positive finite "
                                                       f"number, got {rate!r}")):
        check_rate("lr_sweep", rate)


def test_a_learning_rate_comes_back_as_a_float():
    assert check_rate("lr", 1e-3) == 1e-3
    assert check_rate("lr", 2) == 2.0 and isinstance(check_rate("lr", 2), float)


def test_the_rules_load_without_torch():
    """A curve's specification is checked before anything trains, so the rules and their users import no torch."""
    code = ("import sys, lab.rates, experiments.capacity, experiments.capacity_report, cli.training; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("rate", [True, math.nan, 0.0])
def test_the_trainer_and_the_capacity_curve_refuse_the_same_rates(rate):
    """True was once trained at rate 1 by `lab.train.train` (a bool is an int); both users now share one check."""
    pytest.importorskip("torch")
    from experiments.capacity import CapacitySpec
    from lab.train import Architecture, LayerSpec, sweep_lr, train
    from witness.tasks import Composition

    architecture = Architecture(H=1, d_head=2, d_model=4, layers=(LayerSpec(),))
    says = re.escape(f"a learning rate must be a positive finite number, got {rate!r}")
    with pytest.raises(ParameterError, match=f"^lr: {says}"):
        train(architecture, Composition(L=1, m=2), steps=1, lr=rate)
    with pytest.raises(ParameterError, match=f"^lrs: {says}"):
        sweep_lr(architecture, Composition(L=1, m=2), steps=1, lrs=(1e-3, rate))
    with pytest.raises(ParameterError, match=f"^lr: {says}"):
        CapacitySpec(lr=rate)
    with pytest.raises(ParameterError, match=f"^lr_sweep: {says}"):
        CapacitySpec(lr_sweep=(1e-3, rate))
