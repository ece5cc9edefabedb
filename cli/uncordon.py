"""drover uncordon: lift the cordon of brokers (KIP-1066's cordoned.log.dirs), saying whose cordon each was, and keep
the action, who and why, in the cluster coordinator's audit."""

import asyncio

import typer

from drover.cli.errors import DroverError, broker_ids
from drover.cli.output import Output, default_actor
from drover.settings import Settings


def uncordon(
    ctx: typer.Context,
    brokers: str = typer.Option(..., "--brokers", help="Broker ids, comma-separated: 4,5"),
    reason: str = typer.Option(..., "--reason", help="Why; kept in the cluster coordinator's audit"),
    actor: str | None = typer.Option(None, "--actor", help="Who asks [default: user@host]"),
    force: bool = typer.Option(
        False, "--force", help="Lift the cordon even of brokers a running decommission or demote holds"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what changed as JSON"),
) -> None:
    """Lift the cordon of brokers (remove their cordoned.log.dirs): after a decommission that left them cordoned
    ("safe to stop") when they stay after all, say. Each broker's cordon is named by whose it is: the decommission or
    demote that left it, or none of Drover's flows (an operator's own). A broker that is not cordoned is left as it is.
    The action, with --actor and --reason, goes into the audit of the cluster's coordinator (`drover cluster status`).

    A broker that a running decommission or demote of this Kafka cluster (by its cluster ID) cordons is refused, with
    the flow's ID: `drover cancel ID` ends it and lifts its cordon. --force lifts it anyway (the flow's drain then
    catches what Kafka places on the broker meanwhile).

    \b
    Example:
      drover uncordon --brokers 5 --reason "the host stays after all"
    """
    from drover.adapters.kafka_factory import open_kafka

    settings: Settings = ctx.obj
    out, ids = Output(as_json), broker_ids("--brokers", brokers)
    if not ids:
        raise DroverError("--brokers: give at least one broker id", exit_code=2)
    if not reason.strip():
        raise DroverError("--reason: say why the cordon is lifted", exit_code=2)
    admin = open_kafka(settings)
    try:
        asyncio.run(_uncordon(settings, admin, ids, force, actor or default_actor(), reason, out))
    finally:
        admin.close()


async def _uncordon(settings: Settings, admin, ids: list[int], force: bool, actor: str, reason: str, out) -> None:
    from drover.adapters.temporal import TemporalUnavailable, connect, cordons_held, cordons_left
    from drover.cli.coordinator import coordinator_of, record_action
    from drover.models.decommission import CORDON_CONFIG, CordonsLifted

    cluster = admin.describe_cluster()
    cluster_id, name = cluster.cluster_id or "", settings.cluster_name
    try:
        client = await connect(settings, identity=actor)
    except TemporalUnavailable as e:
        if not force:
            raise DroverError(f"{e}; the running flows were not checked (--force lifts the cordon unchecked)") from None
        out.warning(f"{e}: the flows are not checked and the uncordon is kept in no audit")
        client = None
    held = {} if client is None else await cordons_held(client, ids, cluster_id, name)
    if held and not force:
        flows = "; ".join(f"broker {b} by {flow}" for b, flow in sorted(held.items()))
        raise DroverError(
            f"cordoned by a running flow: {flows}; drover cancel ID ends it and lifts its cordon (or --force), "
            "nothing was changed"
        )
    unknown = [b for b in ids if b not in set(cluster.broker_ids)]
    if unknown:
        raise DroverError(f"--brokers: no broker {', '.join(map(str, unknown))} in the cluster", exit_code=2)
    now = {
        b: c[CORDON_CONFIG]
        for b, c in admin.describe_broker_configs(ids, overrides_only=True).items()
        if CORDON_CONFIG in c
    }
    for b in ids:
        if b not in now:
            out.info(f"broker {b} is not cordoned")
    if not now:
        out.data({"uncordoned": {}})
        return
    left = {} if client is None else await cordons_left(client, sorted(now), cluster_id, name)
    # The coordinator whose audit keeps the action, found (and checked to be this cluster's) before Kafka is written.
    coordinator_id = None if client is None else await coordinator_of(settings, client, name, cluster_id)
    said = {b: f"{CORDON_CONFIG} was {v!r}, {_whose(b, held, left)}" for b, v in now.items()}
    lifted: dict[int, str] = {}
    try:
        for b, value in sorted(now.items()):
            admin.alter_broker_config(b, {}, delete=[CORDON_CONFIG])
            lifted[b] = value
            out.info(f"broker {b} uncordoned ({said[b]})")
    finally:
        if lifted and coordinator_id is not None:
            detail = "; ".join(f"broker {b}: {said[b]}" for b in lifted)
            action = CordonsLifted(actor=actor, reason=reason, brokers=sorted(lifted), detail=detail)
            await record_action(settings, client, coordinator_id, name, "uncordon", action)
    out.data({"uncordoned": lifted, "owners": {b: _whose(b, held, left) for b in now}, "audit": coordinator_id})


def _whose(broker: int, held: dict[int, str], left: dict[int, str]) -> str:
    if broker in held:
        return f"held by the running flow {held[broker]}"
    if broker in left:
        return f"left by {left[broker]}, the last flow that named broker {broker}"
    return "left by none of Drover's flows"
