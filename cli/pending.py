"""What a running workflow's pending activities tell, as Temporal describes them: those being retried, and the
estimate's progress from its heartbeats."""

import json


def retrying(described) -> list[str]:
    """The migration's activities that failed and are being tried again, each with its last failure: what a
    Kafka that does not answer the worker looks like from here."""
    said = []
    for a in described.raw_description.pending_activities:
        if a.attempt > 1 and a.HasField("last_failure"):
            why = " ".join(a.last_failure.message.split())
            said.append(f"{a.activity_type.name} is retrying (attempt {a.attempt}): {why}")
    return said


def preparing(described) -> list[str]:
    """What the estimate is doing, from its activities' heartbeats: the sampling window's seconds left, then the
    Spark job."""
    said = []
    for a in described.raw_description.pending_activities:
        name = a.activity_type.name
        details = [json.loads(p.data) for p in a.heartbeat_details.payloads if p.data]
        if name == "sample_metrics":
            left = next((d["sampling_left_s"] for d in details if isinstance(d, dict) and "sampling_left_s" in d), None)
            said.append("sampling write rates" + (f": {left} s left" if left is not None else " (starting)"))
        elif name == "estimate":
            said.append("estimate: the Spark job is running" if "estimating" in details else "estimate: starting")
    return said
