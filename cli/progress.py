"""What drover status and drover watch add to a migration's own progress: the bytes the steps in progress have
copied so far, read from Kafka. The workflow counts a move's bytes as its steps finish; while a step copies, the new
replicas' size on disk (DescribeLogDirs on their brokers) says how far it got."""

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_port import KafkaAdminError, KafkaPort
from drover.models.progress import MigrationProgress
from drover.settings import Settings

# A status line waits this long at most for Kafka.
METER_TIMEOUT_S = 5.0


class CopyMeter:
    """Reads the cluster the CLI is set up for (DROVER_KAFKA_*), and only for a migration on it; once Kafka does not
    answer, it is not asked again by this process (``off`` says why) and the progress stays the workflow's."""

    def __init__(self, settings: Settings, admin: KafkaPort | None = None):
        self.cluster = settings.cluster_name
        self._settings = settings.model_copy(
            update={"kafka_request_timeout_s": min(settings.kafka_request_timeout_s, METER_TIMEOUT_S)}
        )
        self._admin = admin
        self.off: str | None = None

    def measure(self, progress: MigrationProgress) -> MigrationProgress:
        """The progress with ``bytes_copying`` (the new replicas of the forward steps in progress, each counted up
        to the partition's size) added to ``bytes_done``."""
        copying = [
            (b, broker) for b in progress.batch if b.step is not None for broker in sorted(set(b.step) - set(b.current))
        ]
        # A rollback's steps, and those of a migration being cancelled, do not add to what it moved forward.
        backwards = progress.phase == "rolling_back" or progress.cancelling is not None
        if not copying or backwards or self.off is not None or progress.cluster != self.cluster:
            return progress
        try:
            if self._admin is None:
                self._admin = KafkaAdmin(self._settings)
            sizes = self._admin.describe_log_dirs(sorted({broker for _, broker in copying}))
        except KafkaAdminError as e:
            self.off = str(e)
            return progress
        held = {(s.broker, s.topic, s.partition): s.size_bytes for s in sizes if not s.is_future}
        found = 0
        for b, broker in copying:
            size = held.get((broker, b.topic, b.partition), 0)
            found += min(size, b.size_bytes) if b.size_bytes else size
        done = progress.bytes_done + found
        if progress.bytes_total:
            done = min(done, progress.bytes_total)
        return progress.model_copy(update={"bytes_done": done, "bytes_copying": done - progress.bytes_done})

    def close(self) -> None:
        if isinstance(self._admin, KafkaAdmin):
            self._admin.close()
