"""The README's Tasks run as written: `drover demo` first (what `make demo` runs), then every `sh` block of the
Tasks section in order, in one bash with `set -euo pipefail`, against the test stack and a worker on the task
queue `drover`, as the README's own stack has it."""

import asyncio
import json
import os
import re
from asyncio.subprocess import PIPE, STDOUT

import pytest

from drover.sandbox.settings import SandboxSettings
from drover.worker import activities_for
from tests.cli.test_cli import DROVER, ROOT
from tests.conftest import TEST_SANDBOX, worker_for
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

README = ROOT / "README.md"
DEMO_TOPIC = "drover-demo-orders"


def task_blocks(text: str) -> list[str]:
    """The `sh` code blocks of the README's Tasks section, in order."""
    tasks = text.split("\n## Tasks\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", tasks, re.S)


def test_every_broker_the_readme_names_is_one_the_sandbox_has():
    """The README's commands run on the stack `make demo` leaves, so a broker they name is one of its brokers."""
    have = set(range(1, SandboxSettings().brokers + 1))
    named = re.findall(r"--(?:remove-)?brokers (\d+(?:,\d+)*)", README.read_text())
    assert named, "the README names no broker"
    assert {int(b) for ids in named for b in ids.split(",")} <= have, named


def test_the_tasks_section_has_its_blocks():
    blocks = task_blocks(README.read_text())
    assert len(blocks) >= 8 and all(b.strip() for b in blocks)
    assert any("drover cancel" in b for b in blocks) and any("temporal workflow signal" in b for b in blocks)


async def test_the_readmes_tasks_run_as_written(real_client, admin, tmp_path):
    if DEMO_TOPIC in admin.list_topics():
        await asyncio.to_thread(admin.delete_topics, [DEMO_TOPIC])
        await asyncio.to_thread(wait_until, lambda: DEMO_TOPIC not in admin.list_topics(), 30, 0.5, "topic deleted")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DROVER_", "TEMPORAL_"))} | {
        "DROVER_SANDBOX_STATE_DIR": str(TEST_SANDBOX.state_dir),
        "DROVER_SANDBOX_PORT_BASE": str(TEST_SANDBOX.port_base),
        "DROVER_SANDBOX_TEMPORAL_PORT": str(TEST_SANDBOX.temporal_port),
        "DROVER_SANDBOX_UI_PORT": str(TEST_SANDBOX.ui_port),
        "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
    }
    script = "set -euo pipefail\nset -x\n" + "\n".join(task_blocks(README.read_text()))
    # The blocks run in a folder of their own, so the files they write stay out of the project; PATH has .venv/bin
    # as the README's first block puts it there from the project root.
    async with worker_for(real_client, activities_for(admin), task_queue="drover"):
        demo = await asyncio.create_subprocess_exec(*DROVER, "demo", stdout=PIPE, stderr=STDOUT, env=env, cwd=ROOT)
        said = (await asyncio.wait_for(demo.communicate(), 600))[0].decode()
        assert demo.returncode == 0, said[-3000:]
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", script, stdout=PIPE, stderr=STDOUT, env=env | {"HOME": str(tmp_path)}, cwd=tmp_path
        )
        output = (await asyncio.wait_for(proc.communicate(), 900))[0].decode()
    print(output)
    assert proc.returncode == 0, output[-4000:]
    for verdict in ("migration completed", "migration rolled_back"):
        assert verdict in output, verdict
    assert not [r for r in admin.list_reassignments() if r.topic == DEMO_TOPIC]
    # What the README's temporal query writes is JSON, the migration's progress in it.
    (progress,) = json.loads((tmp_path / "progress.json").read_text())["queryResult"]
    assert progress["cluster"] == "local" and progress["status"], progress
    assert any(a["action"] == "set_throttle" and a["actor"] == "ana" for a in progress["actions"]), progress
