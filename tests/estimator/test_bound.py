"""The estimate's bandwidth lower bound on a migration's makespan (``Estimate.bound_s``)."""

from drover.models.estimate import BrokerEstimate, Estimate


def broker(b: int, transfer_s: float | None) -> BrokerEstimate:
    return BrokerEstimate(
        broker=b,
        receive_bytes=10**9,
        serve_bytes=0,
        receiving=1,
        serving=0,
        min_leader_rate=0,
        min_follower_rate=0,
        recommended_leader_rate=1,
        recommended_follower_rate=1,
        leader_rate=10**7,
        follower_rate=10**7,
        transfer_s=transfer_s,
    )


def estimate(*brokers: BrokerEstimate) -> Estimate:
    return Estimate(
        moves=1,
        bytes_to_move=10**9,
        write_rate=0,
        throttle=10**7,
        brokers=list(brokers),
        duration_s=120,
        duration_method="simulated",
        bottleneck=None,
    )


def test_the_bound_is_the_busiest_brokers_transfer_time_and_none_when_one_is_unbounded():
    assert estimate(broker(1, 100.0), broker(2, 40.0)).bound_s == 100.0
    assert estimate(broker(1, 100.0), broker(2, None)).bound_s is None
    assert estimate().bound_s is None


def test_at_the_bands_rates_each_banded_broker_copies_what_its_rates_have_beyond_the_writes():
    # Broker 1 receives 10^9 bytes while its partitions in flight write 1 MB/s: 10 MB/s copies them in 111 s, the
    # band's 20 MB/s in 53 s; broker 2, never banded, keeps the estimate's 40 s.
    busy = broker(1, None).model_copy(update={"receive_writing": 10**6})
    busy.transfer_s = busy.transfer_at((busy.leader_rate, busy.follower_rate))
    assert busy.transfer_s is not None and round(busy.transfer_s) == 111
    both = estimate(busy, broker(2, 40.0))
    assert both.bound_s == busy.transfer_s
    at_band = both.bound_at({1: (2 * 10**7, 2 * 10**7)})
    assert at_band is not None and round(at_band) == 53
    assert both.bound_at({1: (2 * 10**7, 10**8)}) == 40.0
    # A rate at or under the writes never copies them.
    assert both.bound_at({1: (10**7, 10**6)}) is None
