"""What the cluster's coordinator reads through activities besides its throttle: the settings and throttle book
its lost last run held (taking over), and the disks its moves copy onto (the disk gate)."""

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster import ClusterActivities
    from execution import cluster_gates as gates
    from execution.cluster import ClusterState
    from execution.takeover import TakeOver
    from models.control import AuditEntry
    from workflows.policies import DISK_CALL, DISK_READ_EVERY, QUICK_CALL, TAKE_OVER_WAIT
    from workflows.throttle_writer import ThrottleWriter


async def take_over(s: ClusterState, writer: ThrottleWriter, takeover: TakeOver) -> set[str]:
    """A coordinator started anew (the first, or after the last was lost) takes over what the last run held: its
    throttle book, so its entries count as Drover's, and the operator's freeze, limits, rate and disk limit. The
    migrations of this cluster still running are to be asked to join again with their moves in flight (returned);
    until they have (or TAKE_OVER_WAIT has passed), nothing the last run wrote is removed."""
    took = await workflow.execute_activity_method(
        ClusterActivities.previous_run, workflow.info().workflow_id, **QUICK_CALL
    )
    if took is None:
        return set()
    writer.book = took.book
    s.took_over(took)
    running = await workflow.execute_activity_method(ClusterActivities.running_migrations, s.aliases, **QUICK_CALL)
    awaiting = takeover.found(running, s.holders, workflow.now(), TAKE_OVER_WAIT)
    s.note(
        "take-over",
        f"the last run's throttle book and settings (frozen: {took.frozen}); "
        f"{len(awaiting)} running migration(s) asked to join again",
        workflow.now(),
    )
    return awaiting


async def read_disks(s: ClusterState) -> list[AuditEntry]:
    """The disks of the brokers the moves waiting or in flight copy onto, read when the last reading is
    DISK_READ_EVERY old or misses one of them. A reading that fails keeps the last one; the operator is told the first
    time (returned, for the migrations' audits too)."""
    asked = gates.disk_request(s)
    if not s.disk.due(asked.brokers, workflow.now(), DISK_READ_EVERY):
        return []
    try:
        readings = await workflow.execute_activity_method(ClusterActivities.read_disks, asked, **DISK_CALL)
    except ActivityError as e:
        why = str(e.cause or e)
        workflow.logger.warning("disk use not read: %s", why)
        if s.disk.failed(why, workflow.now()):
            s.note("disk", f"disk use could not be read ({why}); the last reading stands", workflow.now())
            return s.actions[-1:]
        return []
    s.disk.read(readings, workflow.now())
    return []
