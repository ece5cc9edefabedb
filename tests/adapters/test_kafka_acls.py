"""The ACLs Drover asks for: what Kafka's answer lacks (its implied operations counted), and the same list in the
production guide."""

import re

from drover.adapters.kafka_acls import REQUIRED, lacking
from tests.cli.test_cli import ROOT


def test_what_is_lacking_counts_what_kafka_implies():
    assert lacking(["ALTER", "ALTER_CONFIGS"], "Cluster") == []
    assert lacking(["DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"], "Cluster") == ["ALTER"]
    assert lacking(["DESCRIBE"], "Topic") == ["ALTER_CONFIGS"]
    assert lacking(["ALTER_CONFIGS", "DESCRIBE_CONFIGS"], "Topic") == ["DESCRIBE"]
    assert lacking(["ALL"], "Topic") == []
    assert lacking([], "Cluster") == ["ALTER", "ALTER_CONFIGS"]


def test_the_production_guide_lists_exactly_these_acls():
    guide = (ROOT / "docs" / "operations.md").read_text()
    section = guide.split("## Kafka: Drover's principal and its ACLs")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| `(Cluster|Topic)`", section, re.MULTILINE)
    assert sorted((resource, op) for op, resource in rows) == sorted((r, op) for r, op, _ in REQUIRED)
