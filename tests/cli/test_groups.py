"""Option groups: a command's dataclass parameters become its options, and the command gets the dataclass."""

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from drover.cli.groups import BandOptions, LimitChanges, LimitOptions, grouped
from drover.cli.rates import latency_target
from drover.models.band import LatencyTarget


@dataclasses.dataclass
class Who:
    actor: str | None = typer.Option(None, "--actor")
    reason: str = typer.Option("none given", "--reason")


def test_group_fields_are_options_and_the_command_gets_the_groups():
    seen = []

    @grouped
    def command(name: str = typer.Argument(...), *, limits: LimitOptions, who: Who) -> None:
        seen.append((name, limits, who))

    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)  # two commands: the first is called by its name
    done = CliRunner().invoke(app, ["command", "orders", "--max-partitions", "7", "--actor", "ann"])
    assert done.exit_code == 0, done.output
    name, limits, who = seen[0]
    assert name == "orders"
    assert limits == LimitOptions(
        replicas_per_step=1, max_partitions=7, max_per_broker=2, max_replicas=10, max_leaders=5
    )
    assert limits.limits().max_partitions == 7
    assert who == Who(actor="ann", reason="none given")
    shown = CliRunner().invoke(app, ["command", "--help"]).output
    assert "--max-per-broker" in shown and "--reason" in shown and "--limits" not in shown


def test_an_option_given_badly_is_refused_by_typer():
    @grouped
    def command(*, limits: LimitOptions) -> None:
        raise AssertionError("not called")

    app = typer.Typer()
    app.command()(command)
    done = CliRunner().invoke(app, ["--max-leaders", "0"])
    assert done.exit_code == 2 and "--max-leaders" in done.output


def test_limit_changes_name_what_was_given():
    assert LimitChanges(max_partitions=3, max_per_broker=None, max_replicas=None, max_leaders=9).given() == {
        "max_partitions": 3,
        "max_leaders": 9,
    }


def test_two_groups_with_one_option_name_are_refused_at_definition():
    @dataclasses.dataclass
    class Again:
        max_leaders: int = typer.Option(1, "--again")

    def command(*, limits: LimitOptions, again: Again) -> None: ...

    with pytest.raises(TypeError, match="max_leaders"):
        grouped(command)


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("3x", LatencyTarget(ratio=3)),
        ("1.5X", LatencyTarget(ratio=1.5)),
        ("50ms", LatencyTarget(ms=50)),
        (" off ", None),
    ],
)
def test_the_band_follows_latency_at_twice_the_quiet_p99_unless_told(given, target):
    default = BandOptions.__dataclass_fields__["latency_max"].default.default
    assert latency_target(default) == LatencyTarget(ratio=2)
    options = BandOptions(
        throttle_max="20MB/s",
        capacities=["125MB/s"],
        headroom="30%",
        when_starved="floor",
        latency_max=given,
        latency_from="metrics",
    )
    assert options.settings().latency_max == target


def test_the_band_reads_latency_from_the_brokers_metrics_unless_told_the_canary():
    given = {"throttle_max": "20MB/s", "capacities": ["125MB/s"], "headroom": "30%", "when_starved": "floor"}
    assert BandOptions(**given, latency_max="2x", latency_from="metrics").settings().latency_from == "metrics"
    chosen = BandOptions(**given, latency_max="2x", latency_from="canary").settings()
    assert chosen.latency_from == "canary" and "(read by the canary)" in chosen.text()
    assert BandOptions.__dataclass_fields__["latency_from"].default.default == "metrics"
