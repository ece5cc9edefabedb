"""drover plan refuses bad input with one line naming the file, topic or partition, exit code 2, and no plan file."""

import json
import os
import time

import pytest

from drover.adapters.kafka_clients import REACH_TIMEOUT_S
from tests.cli.test_cli import assert_one_line_error, drover

BROKERS = [{"id": 1, "rack": None}, {"id": 2, "rack": None}, {"id": 3, "rack": None}]


def current(*partitions) -> dict:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in partitions]}


GOOD = current(("t", 0, [1, 2]), ("t", 1, [2, 3]))


def write(tmp_path, name, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def plan_args(tmp_path, current_json, brokers_json, *extra: str, out: str = "plan.json") -> list[str]:
    """`drover plan` with the current assignment and the brokers written to files and the plan to ``out``."""
    return [
        *("plan", "--current", write(tmp_path, "current.json", current_json)),
        *("--brokers", write(tmp_path, "brokers.json", brokers_json)),
        *("--out", str(tmp_path / out), *extra),
    ]


@pytest.mark.parametrize(
    ("current_json", "brokers_json", "extra", "needles"),
    [
        ("{not json", BROKERS, [], ["current.json", "not valid JSON", "line 1"]),
        ({"version": 1}, BROKERS, [], ["current.json", "partitions", "Field required"]),
        ({"partitions": [{"topic": "t", "replicas": [1]}]}, BROKERS, [], ["current.json", "partition", "required"]),
        (current(("t", "zero", [1])), BROKERS, [], ["current.json", "partition t-zero", "integer"]),
        (current(("t", -1, [1])), BROKERS, [], ["current.json", "partition t--1", "greater than or equal to 0"]),
        (current(("t", 0, [1]), ("t", 0, [2])), BROKERS, [], ["current.json", "partition t-0 is listed twice"]),
        (current(("t", 3, [1, 1])), BROKERS, [], ["current.json", "partition t-3", "broker 1 appears twice"]),
        (current(("t", 4, [])), BROKERS, [], ["current.json", "partition t-4", "at least 1 item"]),
        (current(("t", 0, ["a"])), BROKERS, [], ["current.json", "partition t-0", "integer"]),
        (GOOD, {"id": 1}, [], ["brokers.json", "valid list"]),
        (GOOD, [{"id": 1}, {"id": 1}], [], ["brokers.json", "broker 1 is listed twice"]),
        (GOOD, [{"rack": "a"}], [], ["brokers.json", "broker entry 0", "id"]),
        (GOOD, BROKERS, ["--remove-brokers", "2,x"], ["--remove-brokers", "'x' is not a broker id"]),
        (GOOD, BROKERS, ["--remove-brokers", "9"], ["broker 9 to remove is not in the broker list"]),
        (GOOD, BROKERS, ["--remove-brokers", "1,2,3"], ["every broker would be removed"]),
        (GOOD, BROKERS, ["--remove-brokers", "1,2"], ["partition t-0 has 2 replicas but only 1 brokers would remain"]),
        (GOOD, [{"id": 1, "rack": "a"}, {"id": 2}, {"id": 3, "rack": "b"}], [], ["broker 2 has no rack"]),
        (GOOD, BROKERS, ["--topics", "("], ["--topics", "not a valid regular expression"]),
        (GOOD, BROKERS, ["--topics", "nothing"], ["no topic matches --topics"]),
        (GOOD, BROKERS, ["--max-moves", "-1"], ["--max-moves"]),
        (GOOD, BROKERS, ["--balance-tolerance", "150%"], ["--balance-tolerance '150%'", "below 100%"]),
        (GOOD, BROKERS, ["--balance-tolerance", "ten"], ["--balance-tolerance 'ten'", "like 10% or 0.1"]),
        (GOOD, BROKERS, ["--sample", "30s"], ["--sample", "goes with --bootstrap"]),
        (GOOD, BROKERS, ["--zone-price", "cheap"], ["--zone-price 'cheap'", "0.02 or $0.02/GB"]),
        (GOOD, BROKERS, ["--zone-price", "-1"], ["--zone-price '-1'", "dollars per GB"]),
        (GOOD, BROKERS, ["--zones", "r1:east"], ["--zones 'r1:east'", "rack=zone pairs"]),
        (GOOD, BROKERS, ["--zone-weight", "2"], ["--zone-weight '2'", "a number from 0 to 1"]),
        (GOOD, BROKERS, ["--zone-weight", "half"], ["--zone-weight 'half'", "a number from 0 to 1"]),
        (GOOD, BROKERS, ["--zones", "r1=,r2=east"], ["--zones 'r1=,r2=east'", "rack=zone pairs"]),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, current_json, brokers_json, extra, needles):
    assert_one_line_error(drover(*plan_args(tmp_path, current_json, brokers_json, *extra)), 2, *needles)
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "plan.rollback.json").exists()


def test_bad_sizes_file_names_the_partition(tmp_path):
    sizes = [{"topic": "t", "partition": 0, "size_bytes": -5}]
    args = plan_args(tmp_path, GOOD, BROKERS, "--sizes", write(tmp_path, "sizes.json", sizes))
    assert_one_line_error(drover(*args), 2, "sizes.json", "partition t-0", "size_bytes")
    assert not (tmp_path / "plan.json").exists()


def test_missing_input_files_and_modes(tmp_path):
    assert_one_line_error(
        drover("plan", "--out", str(tmp_path / "p.json")), 2, "--current and --brokers, or --bootstrap"
    )
    missing = str(tmp_path / "missing.json")
    done = drover("plan", "--current", missing, "--brokers", missing, "--out", str(tmp_path / "p.json"))
    assert_one_line_error(done, 2, "missing.json", "cannot read")
    done = drover("plan", "--bootstrap", "h:1", "--current", missing, "--out", str(tmp_path / "p.json"))
    assert_one_line_error(done, 2, "not both")


def test_plan_prints_the_summary_and_writes_both_files(tmp_path):
    skewed = current(*[("t", p, [1, 2]) for p in range(6)])
    done = drover(*plan_args(tmp_path, skewed, BROKERS, out="out/plan.json"))
    assert done.returncode == 0, done.stderr
    # The plan's report is stdout (it pipes into grep or less); what was written is said on stderr.
    assert "replica moves: 4 (lower bound 4)" in done.stdout
    assert "before: replicas per broker 0-6" in done.stdout and "after: replicas per broker 4-4" in done.stdout
    assert "replica moves" not in done.stderr and "wrote " in done.stderr
    # Piped, the table is tab-separated lines: a header, then one line per broker, nothing wrapped.
    lines = done.stdout.splitlines()
    header = lines.index("Replicas and preferred leaders per broker") + 1
    assert lines[header].split("\t")[0] == "broker"
    rows = lines[header + 1 : header + 1 + len(BROKERS)]
    assert all(len(line.split("\t")) == len(lines[header].split("\t")) for line in rows)
    assert [line.split("\t")[0] for line in rows] == ["1", "2", "3"]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    rollback = json.loads((tmp_path / "out" / "plan.rollback.json").read_text())
    assert [p["partition"] for p in plan["partitions"]] == [p["partition"] for p in rollback["partitions"]]
    assert all(p["replicas"] == [1, 2] for p in rollback["partitions"])


def test_with_sizes_and_racks_the_plan_prices_its_cross_zone_copies(tmp_path):
    # Every partition on brokers 1, 2, 3 (zones a, b, c): the plan moves half of them onto 4, 5, 6.
    brokers = [{"id": i, "rack": "abc"[(i - 1) % 3]} for i in range(1, 7)]
    skewed = current(*[("t", p, [1, 2, 3]) for p in range(6)])
    sizes = write(tmp_path, "sizes.json", [{"topic": "t", "partition": p, "size_bytes": 10**9} for p in range(6)])
    args = plan_args(tmp_path, skewed, brokers, "--sizes", sizes, "--zone-price", "$0.01/GB")
    done = drover(*args)
    assert done.returncode == 0, done.stderr
    summary = json.loads(drover(*args, "--json").stdout)
    z = summary["zone_traffic"]
    assert z["zones"] == 3 and z["bytes_moved"] == summary["bytes_to_move"] and z["price_per_gb"] == 0.01
    line = next(line for line in done.stdout.splitlines() if line.startswith("cross-zone copies"))
    crossing = z["cross_zone_bytes"] / 1e9
    assert f"cross-zone copies over 3 zones: {crossing:.1f} GB of {z['bytes_moved'] / 1e9:.1f} GB copied" in line
    assert f"${z['cost']:,.2f} at $0.01/GB; kafka-reassign-partitions: " in line, line
    # The same racks in one zone: nothing crosses.
    one = drover(*args, "--zones", "a=east,b=east,c=east", "--json")
    assert json.loads(one.stdout)["zone_traffic"]["cross_zone_bytes"] == 0
    # Planned for zones: said on the line, and never more bytes between zones than planned without.
    weighted = drover(*args, "--zone-weight", "1")
    assert "(planned at --zone-weight 1)" in weighted.stdout, weighted.stdout
    w = json.loads(drover(*args, "--zone-weight", "1", "--json").stdout)["zone_traffic"]
    assert w["zone_weight"] == 1 and w["cross_zone_bytes"] <= z["cross_zone_bytes"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--throttle", "fast"], ["--throttle", "'fast' is not a rate"]),
        (["--order", "random"], ["--order", "'random' is not one of 'small-first', 'large-first'"]),
        (["--max-partitions", "0"], ["--max-partitions"]),
        (["--replicas-per-step", "-1"], ["--replicas-per-step"]),
        (["--cluster", "a b"], ["--cluster", "letters, digits"]),
    ],
)
def test_start_refuses_bad_options_before_contacting_anything(tmp_path, args, needles):
    plan = write(tmp_path, "plan.json", GOOD)
    assert_one_line_error(drover("start", plan, *args), 2, *needles)


def test_start_refuses_a_bad_plan_file(tmp_path):
    assert_one_line_error(drover("start", write(tmp_path, "plan.json", "{oops")), 2, "plan.json", "not valid JSON")
    empty = write(tmp_path, "empty.json", {"version": 1, "partitions": []})
    assert_one_line_error(drover("start", empty), 2, "empty.json", "moves nothing")


def test_disk_sizes_for_some_brokers_only_are_refused(tmp_path):
    sizes = [{"topic": "t", "partition": 0, "size_bytes": 10}, {"topic": "t", "partition": 1, "size_bytes": 20}]
    brokers = [{"id": 1, "disk_bytes": 1000}, {"id": 2, "disk_bytes": 1000}, {"id": 3}]
    args = plan_args(tmp_path, GOOD, brokers, "--sizes", write(tmp_path, "sizes.json", sizes))
    assert_one_line_error(drover(*args), 2, "broker 3 has no disk_bytes while others do")
    assert not (tmp_path / "plan.json").exists()


def test_write_rates_from_a_metrics_file_balance_the_leaders_traffic(tmp_path):
    """A CSV with the columns `drover estimate` reads: sizes and write rates. Partition t-0 takes most writes and
    both lists start led by broker 1; with the rates, broker 1 hands one leadership over."""
    metrics = "topic,partition,bytes_in_per_sec,size_bytes\nt,0,900,100\nt,1,900,100\nt,2,10,100\n"
    lists = current(("t", 0, [1, 2, 3]), ("t", 1, [1, 3, 2]), ("t", 2, [2, 3, 1]))
    done = drover(
        *("plan", "--current", write(tmp_path, "current.json", lists)),
        *("--brokers", write(tmp_path, "brokers.json", BROKERS)),
        *("--metrics", write(tmp_path, "metrics.csv", metrics)),
        *("--balance-tolerance", "50%", "--out", str(tmp_path / "plan.json"), "--json"),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    balance = summary["bytes_balance"]
    assert balance["leader_rate_before"][1] > 1.5 and balance["leader_rate_after"][1] <= 1.5, balance
    assert summary["replica_moves"] == 0 and summary["leader_only_changes"] >= 1


def test_kafka_unreachable_is_said_with_the_bootstrap_address_and_how_long_it_waited(tmp_path):
    started = time.monotonic()
    done = drover("plan", "--bootstrap", "127.0.0.1:1", "--out", str(tmp_path / "p.json"))
    took = time.monotonic() - started
    # The wait is the first metadata request's timeout, not Kafka's default request timeout of 30 s.
    assert_one_line_error(done, 1, f"cannot reach Kafka at 127.0.0.1:1 (no answer within {REACH_TIMEOUT_S:g} s)")
    print(f"Kafka unreachable: exit {done.returncode} after {took:.1f} s")
    assert not (tmp_path / "p.json").exists()


def test_a_plan_is_rehearsed_on_the_simulated_kafka(tmp_path):
    # 2 of 12 brokers are empty: the plan read from the simulated cluster (lists and log sizes) fills them.
    env = os.environ | {"DROVER_KAFKA_SIMULATED": "brokers=12,racks=3,partitions=600,rf=3,empty=2"}
    out = tmp_path / "plan.json"
    done = drover("plan", "--bootstrap", "simulated", "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    rollback = json.loads((tmp_path / "plan.rollback.json").read_text())["partitions"]
    assert all(11 not in p["replicas"] and 12 not in p["replicas"] for p in rollback)
    after = [b for p in json.loads(out.read_text())["partitions"] for b in p["replicas"]]
    assert after.count(11) >= 0.8 * 150 and after.count(12) >= 0.8 * 150, "each holds about 1800 / 12 replicas"
    bad = drover("plan", "--bootstrap", "x", "--out", str(out), env=env | {"DROVER_KAFKA_SIMULATED": "brokers=3"})
    assert_one_line_error(bad, 2, "DROVER_KAFKA_SIMULATED='brokers=3'", "does not give partitions=")
