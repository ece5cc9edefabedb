"""Temporal's Worker Deployments for Drover's worker: upgrades without draining.

A worker given a deployment name and a build ID (DROVER_DEPLOYMENT_NAME, DROVER_BUILD_ID) polls as that version of
the deployment. Every Drover workflow is pinned: a run completes on the build it started on, so a new build whose
workflow code would not replay an old history never sees one. Migrations and the coordinator, which run for long,
continue as new onto the new build once it is the deployment's current one (``workflows.versions``).

A build's first worker to start makes it current, the upgrade's one step; a build that was current and was replaced
is never made current again by a worker starting (an old worker restarting mid-upgrade would undo it). Going back is
an operator's act: ``temporal worker deployment set-current-version``.
"""

import asyncio
from collections.abc import Callable

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionMessage
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

# A version is known to the server once its worker's pollers reached it: how long a starting worker waits for that.
REGISTER_WAIT_S = 30.0
# Statuses of a build that was never current (or, unspecified, that the server does not tell).
_NEVER_CURRENT = (
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_UNSPECIFIED,
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE,
    WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED,
)


class DeploymentError(Exception):
    """The worker's build could not be made its deployment's current one: one line saying why."""


def deployment_config(deployment_name: str | None, build_id: str | None) -> WorkerDeploymentConfig | None:
    """The worker's versioning: every workflow pinned to the build it started on; none for an unversioned worker."""
    if deployment_name is None or build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=deployment_name, build_id=build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def make_current(client: Client, deployment_name: str, build_id: str, say: Callable[[str], None]) -> bool:
    """Make this build the deployment's current one if it never was (said with ``say``); True if it is current now.
    Waits up to REGISTER_WAIT_S for the server to know the version from this worker's polls."""
    version = f"{deployment_name}.{build_id}"
    loop = asyncio.get_running_loop()
    give_up = loop.time() + REGISTER_WAIT_S
    while True:
        try:
            status = await _status(client, deployment_name, build_id)
            if status == WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT:
                return True
            if status not in _NEVER_CURRENT:
                name = WorkerDeploymentVersionStatus.Name(status).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_")
                say(
                    f"build {version} is {name.lower()}: it was current and another build replaced it, so this "
                    "worker runs only what is pinned to it (temporal worker deployment set-current-version makes "
                    "it current again)"
                )
                return False
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=deployment_name,
                    build_id=build_id,
                    identity=client.identity,
                )
            )
            say(
                f"build {version} is now the current one: new workflows start on it, and running migrations and the "
                "coordinator move to it at their next continue-as-new"
            )
            return True
        except RPCError as e:
            if e.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION) or loop.time() > give_up:
                raise DeploymentError(f"could not make build {version} current: {e.message}") from e
        await asyncio.sleep(0.5)


async def _status(client: Client, deployment_name: str, build_id: str) -> WorkerDeploymentVersionStatus.ValueType:
    described = await client.workflow_service.describe_worker_deployment_version(
        DescribeWorkerDeploymentVersionRequest(
            namespace=client.namespace,
            deployment_version=VersionMessage(deployment_name=deployment_name, build_id=build_id),
        )
    )
    return described.worker_deployment_version_info.status
