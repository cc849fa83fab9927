"""Each precondition of an attack job is checked once on its path, before the run writes
anything: the model's classes against the data's (check_compatible) and a white-box attack's
need for gradients (check_gradients). The job's batches run without checking them again;
`Attack.run`, called directly, still checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import segtk
from segtk.api import attacks as api_attacks
from segtk.core import Dataset, SegtkError, build
from segtk.core import _attack as core_attack
from segtk.jobs import attack as job
from segtk.testing import TinySegmenter, toy_batch


def counted(calls: Counter[str], name: str, check: Callable[..., None]) -> Callable[..., None]:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        calls[name] += 1
        check(*args, **kwargs)

    return wrapper


def test_the_attack_job_checks_each_precondition_once(monkeypatch: pytest.MonkeyPatch,
                                                      toy_dataset: Dataset) -> None:
    calls: Counter[str] = Counter()
    gradients = counted(calls, "gradients", core_attack.check_gradients)
    compatible = counted(calls, "compatible", api_attacks.check_compatible)
    for module in (api_attacks, job, core_attack):  # wherever the path might check them
        monkeypatch.setattr(module, "check_gradients", gradients, raising=False)
    for module in (api_attacks, job):
        monkeypatch.setattr(module, "check_compatible", compatible, raising=False)
    result = segtk.attack(TinySegmenter(), toy_dataset, attack="pgd", budget=3, limit=2,
                          batch_size=1, classes_from_data=True, warn=lambda message: None)
    assert len(result.records) == 2  # two batches ran
    assert calls == {"gradients": 1, "compatible": 1}


class LabelsOnly(TinySegmenter):
    """A model without gradients."""

    @property
    def has_gradients(self) -> bool:
        return False


def test_attack_run_called_directly_still_refuses_a_white_box_attack_without_gradients() -> None:
    images, labels = toy_batch(1)
    with pytest.raises(SegtkError, match="is white-box: it needs the gradients"):
        build("attack", "pgd", budget=3).run(LabelsOnly(), images, labels)
