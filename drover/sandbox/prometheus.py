"""A Prometheus server beside the sandbox (the `prometheus` binary of Debian's package of that name), scraping every
broker's JMX exporter page with the broker's ID in the label ``broker``: what Drover reads through the query API with
DROVER_BROKER_METRICS=prometheus:URL, as in a cluster whose operators already run Prometheus."""

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path

from drover.sandbox.processes import ProcessTable
from drover.sandbox.settings import SandboxError, SandboxSettings

NAME = "prometheus"


def find_prometheus() -> Path:
    found = shutil.which(NAME)
    if found is None:
        raise SandboxError("no `prometheus` on PATH: install Debian's package (apt-get install prometheus)")
    return Path(found)


def scrape_config(s: SandboxSettings, interval_s: int) -> str:
    """Prometheus' configuration: one job over the brokers' exporter pages, each target labelled with its ID."""
    targets = "".join(
        f"      - targets: ['127.0.0.1:{s.broker_metrics_port(b)}']\n        labels: {{broker: '{b}'}}\n"
        for b in range(1, s.brokers + 1)
    )
    return (
        f"global:\n  scrape_interval: {interval_s}s\n  evaluation_interval: {interval_s}s\n"
        f"scrape_configs:\n  - job_name: kafka\n    static_configs:\n{targets}"
    )


class Prometheus:
    """The server, run by the sandbox's process table (stopped by ``down``), its data under the sandbox's state."""

    def __init__(self, s: SandboxSettings, interval_s: int = 1):
        self.s = s
        self.interval_s = interval_s
        self.home = s.state_dir.resolve() / NAME
        self.procs = ProcessTable(s.state_dir.resolve() / "pids", s.state_dir.resolve() / "logs")

    @property
    def port(self) -> int:
        """Where it listens: port_base+140."""
        return self.s.port_base + 140

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self, timeout_s: float = 60.0) -> str:
        """Starts the server unless it runs, and waits until it has scraped every broker twice (so that it has their
        rates); returns its URL."""
        if self.procs.pid(NAME) is None:
            self.home.mkdir(parents=True, exist_ok=True)
            config = self.home / "prometheus.yml"
            config.write_text(scrape_config(self.s, self.interval_s))
            argv = [
                str(find_prometheus()),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ]
            self.procs.start(NAME, argv, cwd=self.home)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs.pid(NAME) is None:
                raise SandboxError(f"prometheus stopped: {self.procs.tail(NAME, 3)}")
            if self._scraped_twice():
                return self.url
            time.sleep(0.5)
        raise SandboxError(f"prometheus not ready at {self.url} after {timeout_s:.0f} s: {self.procs.tail(NAME, 3)}")

    def _scraped_twice(self) -> bool:
        query = urllib.parse.urlencode({"query": "count_over_time(up[1m]) >= 2"})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=2) as answer:
                return len(json.loads(answer.read())["data"]["result"]) == self.s.brokers
        except (OSError, ValueError, KeyError):
            return False

    def down(self) -> None:
        self.procs.stop([NAME])
        shutil.rmtree(self.home, ignore_errors=True)
