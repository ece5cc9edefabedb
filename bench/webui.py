"""Screenshots of Drover's migrations in the Temporal Web UI, taken by headless Chromium.

    .venv/bin/drover sandbox up && .venv/bin/pip install -e '.[ui]' && .venv/bin/python -m bench.webui [--out DIR]

On the local stack, through the drover CLI: a migration that completes, one stopped, one rolled back, a dry run
and a plan that preflight refuses, all of one new topic. Then Chromium (driven by Playwright, Debian's
/usr/bin/chromium) takes three pictures: the Workflows list of MigrationWorkflows with the DroverStatus column
added (Drover's end state beside Temporal's status: Completed, or Canceled for one stopped or rolled back), the User
Metadata tab of a completed and of a rolled-back
migration (summary, details and current details), and a move's page (its timeline, each step activity with its
summary: "alter_step • step 2 of 3: [3, 1, 2] → [3, 2]"). Prints each state and the PNG paths; look at the pictures.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from drover.adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
DROVER = [sys.executable, "-m", "drover.cli.app"]
UI = "http://127.0.0.1:8233"
# Chromium's flags for this machine's closed network (no background connections, no sandbox as root).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def drover(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*DROVER, *args], capture_output=True, text=True, cwd=ROOT, env=os.environ, timeout=300)
    if check and done.returncode != 0:
        raise SystemExit(f"drover {' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done


def started_id(done: subprocess.CompletedProcess) -> str:
    """The migration ID from `drover start`'s "... migration:... started" line."""
    return next(word for word in done.stderr.split() if word.startswith("migration:"))


def states() -> dict[str, str]:
    return {m["migration_id"]: m["state"] for m in json.loads(drover("list", "--limit", "50", "--json").stdout)}


def wait_ended(migration_id: str) -> str:
    for _ in range(240):
        state = states().get(migration_id, "unknown")
        if state not in ("running", "paused", "stopping", "rolling_back", "cleaning_up", "draining", "preflight"):
            return state
        time.sleep(1)
    raise SystemExit(f"{migration_id} did not end within 4 minutes")


def fill(settings, topic: str, partitions: int, mb_each: int) -> None:
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "linger.ms": 20}, logger=rdkafka_logger())
    for i in range(partitions * mb_each * 100):
        producer.produce(topic, value=b"x" * 10_000, partition=i % partitions)
        producer.poll(0)
    assert producer.flush(60) == 0


def plan_file(folder: Path, topic: str, lists: list[list[int]]) -> Path:
    path = folder / f"{topic}-{uuid.uuid4().hex[:4]}.json"
    plan = ReassignmentFile(
        partitions=[PartitionReplicas(topic=topic, partition=p, replicas=r) for p, r in enumerate(lists)]
    )
    path.write_text(plan.model_dump_json())
    return path


def run_migrations(folder: Path) -> tuple[str, dict[str, str]]:
    """Migrations ending in each state: the topic, and their IDs by what was done."""
    settings = load_settings()
    admin = KafkaAdmin(settings)
    topic = f"webui-{uuid.uuid4().hex[:6]}"
    try:
        admin.create_topic(topic, [[1, 2], [2, 1], [1, 2], [2, 1]])
        fill(settings, topic, 4, 2)
    finally:
        admin.close()
    target = [[3, 4], [4, 3], [3, 1], [4, 2]]
    ids: dict[str, str] = {}
    slow = ["--throttle", "200KB/s", "--no-estimate", "--max-partitions", "2"]
    who = ["--actor", "bench@webui"]
    ids["dry run"] = started_id(
        drover("start", str(plan_file(folder, topic, target)), "--dry-run", "--sample", "2s", *who)
    )
    refused = drover("start", str(plan_file(folder, topic, [[9, 1]])), "--no-estimate", *who, check=False)
    ids["refused by preflight"] = started_id(refused)
    for mode in ("stop", "rollback"):
        done = drover("start", str(plan_file(folder, topic, target)), *slow, *who, "--reason", f"cancel test ({mode})")
        ids[f"cancelled ({mode})"] = started_id(done)
        time.sleep(4)
        drover("cancel", ids[f"cancelled ({mode})"], "--mode", mode, "--reason", "bench", "--actor", "bench@webui")
        wait_ended(ids[f"cancelled ({mode})"])
    done = drover("start", str(plan_file(folder, topic, target)), "--no-estimate", *who, "--reason", "spread", "--wait")
    ids["completed"] = started_id(done)
    return topic, ids


def screenshots(out: Path, topic: str, ids: dict[str, str]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1700, "height": 900})
        page.goto(f"{UI}/namespaces/default/workflows?query=WorkflowType%3D%22MigrationWorkflow%22")
        page.wait_for_selector("text=MigrationWorkflow", timeout=30_000)
        # The DroverStatus column (a custom search attribute) added, the Run ID column taken out to make room.
        page.click("[data-testid=workflows-summary-table-configuration-button]")
        page.click("[data-testid='orderable-list-item-DroverStatus-add-button']")
        page.click("[data-testid='orderable-list-item-Run ID-remove-button']")
        page.click("[data-testid=drawer-close-button]")
        page.wait_for_timeout(1500)
        shots.append(out / "list.png")
        page.screenshot(path=shots[-1])
        for name, path in (("completed", "migration.png"), ("cancelled (rollback)", "rolled-back.png")):
            # Its summary and details (set by drover start) and its current details (kept by the workflow).
            page.goto(f"{UI}/namespaces/default/workflows/{ids[name]}")
            page.click("text=User Metadata", timeout=30_000)
            page.wait_for_selector("text=Current Details", timeout=30_000)
            page.wait_for_timeout(2000)
            shots.append(out / path)
            page.screenshot(path=shots[-1])
        # The completed migration ran last: the move workflow ID's latest run is its move of partition 0.
        cluster = ids["completed"].split(":")[1]
        page.goto(f"{UI}/namespaces/default/workflows/move:{cluster}:{topic}:0")
        page.wait_for_selector("text=Timeline", timeout=30_000)
        page.wait_for_timeout(2500)
        shots.append(out / "move.png")
        page.screenshot(path=shots[-1], full_page=True)
        browser.close()
    return shots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "webui", help="folder for the PNGs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    topic, ids = run_migrations(args.out)
    listed = states()
    for name, migration_id in ids.items():
        print(f"{name:22} {migration_id}  state: {listed.get(migration_id, '?')}")
    for path in screenshots(args.out, topic, ids):
        print(f"screenshot: {path}")


if __name__ == "__main__":
    main()
