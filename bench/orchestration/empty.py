"""Temporal's own limit on this machine: a parent that runs empty child workflows in a sliding window, the shape of
a migration's moves without any of their work."""

import asyncio

from temporalio import workflow


@workflow.defn
class EmptyChild:
    @workflow.run
    async def run(self) -> None:
        return None


@workflow.defn
class SlidingWindowParent:
    @workflow.run
    async def run(self, children: int, window: int) -> int:
        running: set[asyncio.Future] = set()
        started = 0
        while started < children or running:
            while started < children and len(running) < window:
                running.add(
                    asyncio.ensure_future(
                        workflow.execute_child_workflow(EmptyChild.run, id=f"{workflow.info().workflow_id}-{started}")
                    )
                )
                started += 1
            done, _ = await workflow.wait(running, return_when=asyncio.FIRST_COMPLETED)
            running.difference_update(done)
        return started
