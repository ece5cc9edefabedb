"""What a simulated Kafka is made of (``DROVER_KAFKA_SIMULATED``; ``drover.adapters.simulated_kafka`` runs it): parsed
where the settings are checked, without the simulation itself."""

from dataclasses import dataclass, fields

from pydantic import ByteSize, TypeAdapter, ValidationError

_BYTES = TypeAdapter(ByteSize)


@dataclass(frozen=True)
class SimulationSpec:
    """What ``DROVER_KAFKA_SIMULATED`` describes: ``key=value`` pairs separated by commas. Sizes and rates take
    pydantic's byte units (100MB, 1MiB; a rate is per second, ``/s`` optional)."""

    brokers: int
    partitions: int
    racks: int = 0
    rf: int = 3
    # Topics the partitions are spread over (default: one per 100 partitions).
    topics: int = 0
    # The highest-numbered brokers that hold nothing yet (brokers just added).
    empty: int = 0
    # Mean log size and mean write rate per partition (log-normal, sigma 1; a large partition is a busy one).
    size: int = 100_000_000
    rate: int = 100_000
    # Each broker's network, bytes per second each way.
    net: int = 125_000_000
    # Seconds a step takes at least.
    step: float = 0.2
    seed: int = 1

    @classmethod
    def parse(cls, text: str) -> "SimulationSpec":
        """The spec from ``brokers=200,racks=10,partitions=100000,rf=3``; ValueError names the bad pair."""
        known = {f.name: f for f in fields(cls)}
        given: dict[str, object] = {}
        for pair in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = (s.strip() for s in pair.partition("="))
            if not sep or name not in known:
                raise ValueError(f"{pair!r} is not one of {', '.join(f'{k}=' for k in known)}")
            given[name] = _value(name, value)
        missing = [k for k in ("brokers", "partitions") if k not in given]
        if missing:
            raise ValueError(f"{text!r} does not give {' or '.join(f'{k}=' for k in missing)}")
        spec = cls(**given)  # type: ignore[arg-type]
        if spec.brokers < 1 or spec.partitions < 1 or spec.rf < 1:
            raise ValueError("brokers=, partitions= and rf= must be at least 1")
        if spec.rf > spec.brokers - spec.empty:
            raise ValueError(f"rf={spec.rf} needs as many brokers holding data; there are {spec.brokers - spec.empty}")
        if spec.net < 1:
            raise ValueError("net= must be at least 1 byte per second")
        return spec


def _value(name: str, text: str) -> int | float:
    try:
        if name in ("size", "rate", "net"):
            return int(_BYTES.validate_python(text.removesuffix("/s")))
        if name == "step":
            return float(text.removesuffix("s"))
        return int(text)
    except (ValueError, ValidationError):
        unit = " (a size, like 100MB)" if name in ("size", "rate", "net") else ""
        raise ValueError(f"{name}={text!r} is not a number{unit}") from None
