"""The alerting rules shipped in deploy/prometheus pass `promtool check rules`, fire as their unit tests say
(`promtool test rules`), and name only metrics the worker exports."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "drover-rules.yml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed; the test set-up (make test) installs Prometheus, which has it")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return subprocess.run([tool, *args], cwd=RULES.parent, capture_output=True, text=True, timeout=60)


def test_the_rules_pass_promtool_check():
    done = promtool("check", "rules", RULES.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout, done.stdout


def test_each_alert_fires_where_its_unit_test_says_and_not_elsewhere():
    done = promtool("test", "rules", "drover-rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_and_the_dashboard_name_only_metrics_the_worker_exports():
    exported = set(re.findall(r"drover_[a-z_]+", (ROOT / "workflows" / "metrics.py").read_text()))
    exported |= set(re.findall(r"drover_[a-z_]+", (ROOT / "drover" / "adapters" / "metrics.py").read_text()))
    for shipped in (RULES, ROOT / "deploy" / "grafana" / "drover-dashboard.json"):
        # A histogram's series are its name with _bucket, _sum and _count.
        named = {re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"drover_[a-z_]+", shipped.read_text())}
        assert named and named <= exported, (shipped.name, sorted(named - exported))
