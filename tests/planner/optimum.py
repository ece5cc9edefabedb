"""The exact fewest moves to a globally balanced, rack-valid placement, by min-cost flow (networkx; tests and bench).

source -> partition (its RF) -> (partition, rack) (the rack limit) -> broker (1; cost 1 unless it holds the partition
now) -> sink: every kept broker takes floor(R / B), and R mod B of them one more.
"""

import networkx as nx

from drover.models.plan import PlanRequest
from drover.planner.quotas import rack_limit


def fewest_moves(request: PlanRequest) -> int | None:
    """The optimum, or None when no globally balanced, rack-valid placement exists."""
    kept = sorted({b.id for b in request.brokers} - set(request.remove_brokers))
    rack_of = {b.id: b.rack for b in request.brokers}
    racks = sorted({rack_of[b] for b in kept if rack_of[b] is not None})
    racked = len(racks) > 1
    sizes = [sum(1 for b in kept if rack_of[b] == r) for r in racks]
    total = sum(len(p.replicas) for p in request.partitions)
    floor, extra = divmod(total, len(kept))

    g = nx.DiGraph()
    g.add_node("source", demand=-total)
    g.add_node("sink", demand=total)
    for b in kept:
        g.add_edge(("broker", b), "sink", capacity=floor, weight=0)
        if extra:
            g.add_edge(("broker", b), "extra", capacity=1, weight=0)
    if extra:
        g.add_edge("extra", "sink", capacity=extra, weight=0)
    for n, p in enumerate(request.partitions):
        rf = len(p.replicas)
        g.add_edge("source", ("p", n), capacity=rf, weight=0)
        limit = rack_limit(rf, sizes) if racked else rf
        for rack in racks if racked else [None]:
            g.add_edge(("p", n), ("pr", n, rack), capacity=limit, weight=0)
            for b in kept:
                if not racked or rack_of[b] == rack:
                    g.add_edge(("pr", n, rack), ("broker", b), capacity=1, weight=0 if b in p.replicas else 1)
    try:
        flow = nx.min_cost_flow(g)
    except nx.NetworkXUnfeasible:
        return None
    return nx.cost_of_flow(g, flow)
