"""The Temporal client, always with the pydantic data converter."""

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from settings import Settings


class TemporalUnavailable(Exception):
    pass


async def connect(settings: Settings) -> Client:
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
        )
    except RuntimeError as e:
        raise TemporalUnavailable(
            f"cannot reach Temporal at {settings.temporal_address} ({e}); start it with 'drover sandbox up' "
            f"or set DROVER_TEMPORAL_ADDRESS"
        ) from e
