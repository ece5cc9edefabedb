"""The Temporal Web UI of the test stack, as an operator opens it: headless Chromium (Debian's package, driven by
Playwright) opens the User Metadata of a migration while its move runs on Kafka, of that move and of the cluster's
coordinator, and reads what they show. Each page is also saved as a picture beside the test's files."""

import asyncio
import shutil

import pytest

from drover.adapters.temporal import migration_result
from drover.models import TopicPartition
from drover.models.admission import Limits
from drover.models.control import Cancel, SetThrottle
from drover.models.coordination import cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import produce, step_under_way

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium")
# Chromium's flags for this machine's closed network (no background connections, no sandbox as root).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


def user_metadata(ui_url: str, workflow_ids: dict[str, tuple[str, str]], out) -> dict[str, str]:
    """For each named workflow (its ID, and a text its current details hold), the text of its page once its User
    Metadata (summary, details, current details) is open and the current details have loaded (the Web UI asks the
    workflow for them, through the worker); each page saved as ``out/<name>.png``."""
    from playwright.sync_api import sync_playwright

    texts = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            for name, (workflow_id, loaded) in workflow_ids.items():
                page.goto(f"{ui_url}/namespaces/default/workflows/{workflow_id}")
                page.click("text=User Metadata", timeout=30_000)
                for _ in range(60):
                    seen = shown(page)
                    if loaded in seen:
                        break
                    page.wait_for_timeout(500)
                else:
                    page.screenshot(path=out / f"{name}-failed.png", full_page=True)
                    raise AssertionError(f"{name}: no {loaded!r} within 30 s on {page.url}: {seen}")
                page.screenshot(path=out / f"{name}.png", full_page=True)
                texts[name] = seen
        finally:
            browser.close()
    return texts


def shown(page) -> str:
    """The page's text with that of the frames it shows Markdown in (a frame each). The Web UI replaces a frame as
    it renders the details again (it polls the workflow): one detached while it was read is left out of this look,
    and the next look reads its successor."""
    from playwright.sync_api import Error

    texts = []
    for frame in page.frames:
        try:
            texts.append(frame.inner_text("body", timeout=5_000))
        except Error as e:
            if not frame.is_detached() and "detached" not in str(e):
                raise
    return "\n".join(texts)


async def test_the_web_ui_shows_a_running_migration_its_move_and_the_coordinator_as_they_are_now(
    real_client, admin, real_settings, stack, topic_name, tmp_path
):
    assert CHROMIUM, "the Web UI is opened with Debian's chromium (make test installs it)"
    admin.create_topic(topic_name, [[1, 2]])
    # About 4 MB: under a throttle of 200 then 100 KB/s its step outlasts the seconds the pages take to open.
    await asyncio.to_thread(produce, real_settings, topic_name, 0, 1600, 2500)
    migration = MigrationInput(
        cluster="test",
        moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 3])],
        throttle_bytes_per_s=200_000,
        limits=Limits(max_partitions=1, max_per_broker=1),
    )
    cluster_id = admin.describe_cluster().cluster_id
    pages = {
        "coordinator": (cluster_workflow_id(cluster_id), "time windows:"),
        "move": (move_workflow_id(migration.cluster, topic_name, 0), "on Kafka:"),
    }
    async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        pages["migration"] = (handle.id, "current batch:")
        await step_under_way(real_client, admin, handle, TopicPartition(topic=topic_name, partition=0))
        # An operator's change while it runs: the migration's page shows the throttle now in force, not the start's.
        await handle.execute_update(
            MigrationWorkflow.act_update, SetThrottle(rate_bytes_per_s=100_000, actor="alice", reason="peak hours")
        )
        texts = await asyncio.to_thread(user_metadata, stack.s.ui_url, pages, tmp_path)
        result = await asyncio.wait_for(handle.result(), timeout=300)
    assert result.verified, result

    # The migration: its phase, its moves, the throttle set by alice, the move in its current batch, her action.
    migration_page = texts["migration"]
    assert "moves: 0 of 1 done, 1 in flight" in migration_page, migration_page
    assert "throttle 100.0 KB/s" in migration_page and "throttle 200.0 KB/s" not in migration_page, migration_page
    assert f"- {topic_name}-0: [1, 2], step to [1, 3], final [1, 3]" in migration_page, migration_page
    assert "limits: 1 partition, 1 per broker" in migration_page, migration_page
    assert "alice" in migration_page and "peak hours" in migration_page, migration_page
    # The move: its step under way, the list Kafka shows, where it goes, and who sets its throttle.
    move_page = texts["move"]
    assert f"{topic_name}-0: stepping: step 1 of 1: [1, 2] → [1, 3]" in move_page, move_page
    assert "on Kafka: [1, 2" in move_page and "from [1, 2] to [1, 3]; 0 steps done" in move_page, move_page
    assert f"the coordinator of cluster {migration.cluster} sets it" in move_page, move_page
    # The coordinator: coordinating this migration with its move in flight, its limits, throttle, windows, band.
    coordinator_page = texts["coordinator"]
    assert f"Drover coordinator of Kafka cluster test ({cluster_id})" in coordinator_page, coordinator_page
    assert "coordinating" in coordinator_page and f"- {handle.id}: 1 in flight" in coordinator_page, coordinator_page
    assert all(
        what in coordinator_page for what in ("limits: ", "time windows: ", "throttle band: ", "disk limit: ")
    ), coordinator_page
    print("\n" + "\n".join(str(tmp_path / f"{name}.png") for name in pages))


STATUSES = ("Completed", "Canceled", "Failed", "Running", "Terminated", "Timed Out")


def listed_statuses(ui_url: str, workflow_ids: list[str], out) -> dict[str, str]:
    """The status the Web UI's list of workflows shows for each of ``workflow_ids`` (the list filtered to them), once
    every one is listed; the page saved as ``out/list.png``."""
    from urllib.parse import quote

    from playwright.sync_api import TimeoutError, sync_playwright

    query = "WorkflowId IN (" + ", ".join(f"'{w}'" for w in workflow_ids) + ")"
    statuses: dict[str, str] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 700})
            for _ in range(10):
                page.goto(f"{ui_url}/namespaces/default/workflows?query={quote(query)}")
                statuses = {}
                for workflow_id in workflow_ids:
                    link = page.get_by_text(workflow_id, exact=True).first
                    try:
                        link.wait_for(timeout=10_000)
                    except TimeoutError:
                        continue
                    row = link.locator("xpath=ancestor::*[self::tr or @role='row'][1]").inner_text()
                    statuses[workflow_id] = next((s for s in STATUSES if s.upper() in row.upper()), row)
                if len(statuses) == len(workflow_ids) and "Running" not in statuses.values():
                    break
            page.screenshot(path=out / "list.png", full_page=True)
        finally:
            browser.close()
    return statuses


async def test_the_web_uis_list_tells_a_stopped_or_rolled_back_migration_from_a_completed_one(
    real_client, admin, real_settings, stack, topic_name, tmp_path
):
    assert CHROMIUM, "the Web UI is opened with Debian's chromium (make test installs it)"
    admin.create_topic(topic_name, [[1, 2], [1, 2], [1, 2]])
    # Partitions 1 and 2 hold 2 MB each: under 100 KB/s a step of theirs runs long enough to be cancelled mid-way.
    for partition in (1, 2):
        await asyncio.to_thread(produce, real_settings, topic_name, partition, 800, 2500)
    ended: dict[str, str] = {}
    async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
        plan = [PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 3])]
        done = await start_migration(real_client, MigrationInput(cluster="test", moves=plan), worker.task_queue)
        ended[(await asyncio.wait_for(migration_result(done), 120)).status] = done.id
        for mode, partition in (("stop", 1), ("rollback", 2)):
            plan = [PartitionReplicas(topic=topic_name, partition=partition, replicas=[1, 3])]
            migration = MigrationInput(cluster="test", moves=plan, throttle_bytes_per_s=100_000)
            handle = await start_migration(real_client, migration, worker.task_queue)
            await step_under_way(real_client, admin, handle, TopicPartition(topic=topic_name, partition=partition))
            await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode=mode, actor="alice", reason="ui"))
            ended[(await asyncio.wait_for(migration_result(handle), 300)).status] = handle.id
    assert set(ended) == {"completed", "stopped", "rolled_back"}, ended
    statuses = await asyncio.to_thread(listed_statuses, stack.s.ui_url, list(ended.values()), tmp_path)
    print(f"\n{tmp_path / 'list.png'}: {statuses}")
    assert statuses == {
        ended["completed"]: "Completed",
        ended["stopped"]: "Canceled",
        ended["rolled_back"]: "Canceled",
    }, statuses
