"""What a run of a workflow that continues as new takes: its input and, in a run that continues, the state the last
run handed over, typed. Temporal starts the first run with the input alone (``models``' input types); each later run
gets the same input with ``carry`` set."""

from pydantic import BaseModel

from drover.core.coordinator.state import ClusterState
from drover.core.migration.state import MigrationState
from drover.models.coordination import ClusterInput, ThrottleBook
from drover.models.migration import MigrationInput


class MigrationRun(MigrationInput):
    """A migration's run: in one that continues the migration, ``carry`` holds the plan (``moves`` is empty)."""

    carry: MigrationState | None = None

    def _plan_carried(self) -> bool:
        return self.carry is not None

    def continued(self, state: MigrationState) -> "MigrationRun":
        """The next run's input: this one with the state handed over, and without the plan (it is in the state)."""
        return self.model_copy(update={"moves": [], "carry": state})


class ClusterCarry(BaseModel):
    """What a coordinator's run hands over: its state and its throttle book."""

    state: ClusterState
    book: ThrottleBook = ThrottleBook()


class ClusterRun(ClusterInput):
    """A cluster coordinator's run."""

    carry: ClusterCarry | None = None

    def first_state(self) -> ClusterState:
        """The state this run starts from: the one handed over, one run more; or a new one under its name."""
        if self.carry is None:
            return ClusterState(name=self.name, cluster_id=self.cluster_id or None, aliases=[self.name])
        state = self.carry.state
        return state.model_copy(update={"runs": state.runs + 1, "aliases": state.aliases or [self.name]})

    def continued(self, state: ClusterState, book: ThrottleBook) -> "ClusterRun":
        return self.model_copy(update={"carry": ClusterCarry(state=state, book=book)})
