"""Drover's custom search attributes on its Temporal namespace: checked when a worker starts, and registered
through Temporal's operator API where they are missing.

Workflows set them as they run (``DroverStatus`` as a migration's phase changes); on a namespace without them, every
workflow task that sets one fails and is retried for ever. The dev server of the sandbox and the tests is started
with them; a Temporal server of an operator's own may not have them yet.
"""

from collections.abc import Callable

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

# Name -> type, as `temporal operator search-attribute create --type` and `temporal server start-dev
# --search-attribute NAME=TYPE` spell it.
SEARCH_ATTRIBUTES = {"DroverCluster": "Keyword", "DroverStatus": "Keyword", "DroverAliases": "KeywordList"}
_INDEXED = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


class SearchAttributesError(Exception):
    """The namespace lacks one of Drover's search attributes, or has one of another type, and the worker could not
    set that right: one line saying which, and the command that does it."""


async def ensure_search_attributes(client: Client, say: Callable[[str], None]) -> list[str]:
    """Those of Drover's search attributes the namespace lacked, now registered (said with ``say``); none when it had
    them all. Where Temporal does not let this worker list them (a cloud namespace's API key, say), it says so and
    returns none: the workflows' first use then tells."""
    namespace = client.namespace
    try:
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except RPCError as e:
        if e.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            say(f"could not check the search attributes of namespace {namespace} ({e.message}); {_create(namespace)}")
            return []
        raise SearchAttributesError(f"namespace {namespace}: listing its search attributes failed: {e.message}") from e
    have = dict(listed.custom_attributes)
    wrong = [
        f"{name} is {_kind(have[name])}, not {kind}"
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name in have and have[name] != _INDEXED[kind]
    ]
    if wrong:
        raise SearchAttributesError(
            f"namespace {namespace}: search attribute {'; '.join(wrong)}; Drover's workflows could not set it. "
            "Use a namespace of Drover's own"
        )
    missing = [name for name in SEARCH_ATTRIBUTES if name not in have]
    if not missing:
        return []
    request = AddSearchAttributesRequest(
        namespace=namespace, search_attributes={name: _INDEXED[SEARCH_ATTRIBUTES[name]] for name in missing}
    )
    try:
        await client.operator_service.add_search_attributes(request)
    except RPCError as e:
        raise SearchAttributesError(
            f"namespace {namespace} lacks Drover's search attributes {', '.join(missing)} and this worker could not "
            f"register them ({e.message}); {_create(namespace, missing)}"
        ) from e
    say(f"registered Drover's search attributes {', '.join(missing)} in namespace {namespace}")
    return missing


def _kind(indexed: IndexedValueType.ValueType) -> str:
    """INDEXED_VALUE_TYPE_KEYWORD_LIST -> KeywordList, as the temporal CLI spells the types."""
    name = IndexedValueType.Name(indexed).removeprefix("INDEXED_VALUE_TYPE_")
    return "".join(part.capitalize() for part in name.split("_"))


def _create(namespace: str, names: list[str] | None = None) -> str:
    commands = [
        f"temporal operator search-attribute create --namespace {namespace} --name {name} --type {kind}"
        for name, kind in SEARCH_ATTRIBUTES.items()
        if names is None or name in names
    ]
    return "register them with: " + " && ".join(commands)
