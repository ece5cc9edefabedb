"""A move's current details in the Web UI, derived from its state."""

from drover.core.move import state as machine
from drover.core.move.state import MovePhase
from drover.core.move.view import details
from drover.models import MoveInput
from drover.models.cluster import PartitionState


def test_the_details_say_what_the_move_does_the_list_kafka_shows_and_how_it_ended():
    move = MoveInput(cluster="prod", topic="orders", partition=3, target=[4, 2, 3], token="t")
    s, _ = machine.begin(move, 5.0)
    assert details(s).startswith("**orders-3**: reading the list Kafka shows")
    assert "on Kafka" not in details(s)
    s.shown = PartitionState(topic="orders", partition=3, replicas=[1, 2, 3], isr=[1, 2], leader=None)
    s.original, s.phase = [1, 2, 3], MovePhase.FROZEN
    frozen = details(s)
    assert frozen.startswith("**orders-3**: waiting: the cluster is frozen")
    assert "on Kafka: [1, 2, 3], leader none, in sync [1, 2]" in frozen
    assert "from [1, 2, 3] to [4, 2, 3]; 0 steps done" in frozen and "cluster prod" in frozen
    assert details(s, "failed: Kafka refused").startswith("**orders-3**: failed: Kafka refused")
