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
