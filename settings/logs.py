"""structlog, configured once per process: JSON lines when stderr is not a terminal, readable lines when it is."""

import logging
import sys

import structlog

_configured = False


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    global _configured
    if _configured:
        return
    _configured = True
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    numeric = getattr(logging, level.upper())
    # Standard-library loggers (temporalio, kafka-python) go through the same renderer.
    logging.basicConfig(level=numeric, stream=sys.stderr, format="%(message)s")
    for noisy in ("kafka", "py4j"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
