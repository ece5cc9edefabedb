"""A migration's replication throttle, as one value from `drover start --throttle` (or the estimate's rates with
``--throttle auto``) through its state and its demand to the coordinator, which writes the brokers' configs."""

from pydantic import BaseModel, Field

# (leader, follower) bytes per second.
Rates = tuple[int, int]


class Throttle(BaseModel):
    """The throttle a migration asks for on the brokers of its moves: one rate, leader and follower alike, on every
    broker; or each broker's own (leader, follower) rates, from the estimate; neither: no throttle."""

    rate: int | None = Field(None, ge=1)
    per_broker: dict[int, Rates] = {}

    @classmethod
    def fixed(cls, rate: int | None) -> "Throttle":
        """One rate on every broker (None: no throttle)."""
        return cls(rate=rate)

    @property
    def unset(self) -> bool:
        return self.rate is None and not self.per_broker

    @property
    def estimated(self) -> bool:
        """The estimate's per-broker rates, not one fixed rate: the coordinator's band may move them."""
        return self.rate is None and bool(self.per_broker)

    def top(self) -> Rates:
        """The highest leader and follower rates of any broker (the one rate, if that is what it is)."""
        if not self.per_broker:
            return (self.rate or 0, self.rate or 0)
        return (max(r[0] for r in self.per_broker.values()), max(r[1] for r in self.per_broker.values()))

    def on(self, broker: int) -> Rates | None:
        """The rates on ``broker``: its own, else the one rate, else the highest any broker has; None: no throttle."""
        if self.unset:
            return None
        if broker in self.per_broker:
            return self.per_broker[broker]
        rate = self.rate or max(self.top())
        return (rate, rate)

    def capped(self, cap: int | None) -> "Throttle":
        """Held to ``cap`` on every side and broker; no throttle becomes the cap."""
        if cap is None:
            return self
        return Throttle(
            rate=min(self.rate or cap, cap),
            per_broker={b: (min(lr, cap), min(fr, cap)) for b, (lr, fr) in self.per_broker.items()},
        )

    def text(self) -> str:
        if self.unset:
            return "none"
        if self.rate is not None:
            return str(self.rate)
        return "per broker: " + ", ".join(f"{b}: {lr}/{fr}" for b, (lr, fr) in sorted(self.per_broker.items()))
