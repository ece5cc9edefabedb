"""A long-running workflow's move to a newer worker build, at its continue-as-new.

Every Drover workflow is pinned to the build it started on (``drover.adapters.deployments``). Once a newer build is the
deployment's current one, Temporal tells each pinned run; a migration or the coordinator then continues as new at its
next safe point and the new run starts on that build, so no history ever replays on code other than its own. On an
unversioned worker nothing is ever told, and these change nothing.
"""

from typing import Any, NoReturn

from temporalio import workflow

_UPGRADE = workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
_STAY = workflow.ContinueAsNewVersioningBehavior.UNSPECIFIED


def newer_build() -> bool:
    """A newer build than this run's is its deployment's current one."""
    return workflow.info().is_target_worker_deployment_version_changed()


def continue_as_new(arg: Any) -> NoReturn:
    """Continue as new, onto the current build when a newer one is; else on this run's build, as pinned runs do."""
    workflow.continue_as_new(arg, initial_versioning_behavior=_UPGRADE if newer_build() else _STAY)
