"""One face for an attack: the object `Attack.run` hands an attack is the `Oracle`, whose public
members are exactly what attacks use, at most 14, none of which finalises or replaces the
result or checks the attack afterwards (the run keeps those: `OracleRun`)."""

from __future__ import annotations

from segtk.core import Attack, Oracle
from segtk.testing import TinySegmenter, toy_batch

FACE = {
    # what it may read
    "clean", "labels", "reference", "eps_unit", "proxy", "rngs", "batch_size", "budget",
    # its ways to ask, and to declare its iterate
    "verified", "active", "query", "query_each", "loss_and_grad", "set_iterate",
}  # fmt: skip
RUN_SIDE = {"result", "overwritten", "remaining", "checkpoints", "returns", "white_box", "lo", "hi"}


def public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_the_face_an_attack_gets_is_listed_here() -> None:
    assert public(Oracle) == FACE
    assert len(FACE) <= 14
    assert not public(Oracle) & RUN_SIDE


class Peek(Attack):
    """Keeps the object it is handed, and queries the clean images once."""

    name = "peek"
    seen: list[object] = []

    def attack(self, oracle: Oracle) -> None:
        self.seen.append(oracle)
        oracle.query(oracle.clean)


def test_an_attack_is_handed_the_face_and_cannot_finalise_its_result() -> None:
    images, labels = toy_batch(2)
    result = Peek(budget=3).run(TinySegmenter(), images, labels)
    (handed,) = Peek.seen
    assert type(handed) is Oracle and public(handed) == FACE
    assert not any(hasattr(handed, name) for name in RUN_SIDE)
    assert result.queries.tolist() == [1, 1]  # the run read the result from its own side
