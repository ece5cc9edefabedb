"""One partition move's state machine (``state``) and what it takes and gives (``events``). Pure."""
