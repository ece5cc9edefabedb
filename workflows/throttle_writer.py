"""The cluster coordinator's writes of Kafka's throttle configs, in passes: what Drover wrote and the operator's own
values saved before Drover first wrote over them (the throttle book), the passes started and done (a leave waits for
a pass that started after it), the last pass's error and the brokers a rate was left on."""

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drover.activities.cluster import ClusterActivities
    from drover.models.coordination import ThrottleBook, ThrottleWanted, ThrottleWrite
    from drover.steps.throttle import throttle_union, writable
    from drover.workflows.failures import failure_message
    from drover.workflows.policies import QUICK_CALL


class ThrottleWriter:
    def __init__(self, book: ThrottleBook) -> None:
        self.book = book
        self.passes = 0
        self.passes_done = 0
        self.error: str | None = None
        # Brokers that keep a rate Drover no longer wants (down when it was removed).
        self.left: list[int] = []

    def start(self) -> int:
        """A new pass: its number."""
        self.passes += 1
        return self.passes

    async def write(self, wanted: ThrottleWanted) -> str | None:
        """Kafka's throttle configs made ``wanted`` (the operator's own values saved first where Drover has not
        written yet); the error if Kafka refuses. Whatever the write may have done is kept in the book then, so a
        later write removes it."""
        book = self.book
        try:
            if wanted != book.written:
                request = ThrottleWrite(wanted=wanted, book=book)
                if any(t not in book.saved_topics for t in wanted.topics) or any(
                    b not in book.saved_brokers for b in wanted.brokers
                ):
                    book = self.book = await workflow.execute_activity_method(
                        ClusterActivities.save_throttle_configs, request, **QUICK_CALL
                    )
                    request = ThrottleWrite(wanted=wanted, book=book)
                self.book = await workflow.execute_activity_method(
                    ClusterActivities.write_throttle, request, **QUICK_CALL
                )
            self.error = None
        except ActivityError as e:
            # It writes only where the operator's values are saved: a failed save recorded nothing, and nothing else
            # counts as written.
            touched = writable(wanted, book.saved_topics, book.saved_brokers)
            self.book = book.model_copy(update={"written": throttle_union(book.written, touched)})
            self.error = f"the cluster's throttle could not be written: {failure_message(e)}"
            workflow.logger.warning(self.error)
        return self.error

    def finish(self, this: int, still_wanted: ThrottleWanted) -> None:
        """Pass ``this`` has ended; ``still_wanted`` is what the moves in flight need now."""
        self.passes_done = this
        self.left = sorted(set(self.book.written.brokers) - set(still_wanted.brokers))

    async def pass_after(self, started: int) -> None:
        """Until a pass that started after the first ``started`` has ended."""
        await workflow.wait_condition(lambda: self.passes_done > started)
