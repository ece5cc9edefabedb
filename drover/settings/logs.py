"""Logging, configured once per process: JSON lines when stderr is not a terminal (or DROVER_LOG_FORMAT=json),
readable lines when it is.

Every line goes through one standard-library handler whose structlog ``ProcessorFormatter`` renders it: Drover's
own structlog events, and the standard-library loggers of the Temporal SDK (its Rust core forwarded to
``temporalio.core``), kafka-python, librdkafka (``rdkafka``) and the Spark JVM (``spark``). Uncaught exceptions,
in any thread, and warnings are logged the same way, so in JSON a traceback is a field of one line, never lines
of its own.
"""

import logging
import sys
import threading

import structlog

_configured = False

# Loggers too chatty at info: kept at warning unless the level asked for is higher.
_NOISY = ("kafka", "py4j")


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    global _configured
    if _configured:
        return
    _configured = True
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    numeric = getattr(logging, level.upper())
    shared: list = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # A traceback as structured data in JSON (one line), drawn as text on a terminal.
            *([structlog.processors.dict_tracebacks] if as_json else []),
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(numeric)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    logging.captureWarnings(True)
    _log_uncaught()


def _log_uncaught() -> None:
    """Uncaught exceptions (main thread and others) logged as one event with the traceback, not printed."""
    log = structlog.get_logger("drover.uncaught")

    def main_hook(kind, value, tb) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, value, tb)
            return
        log.error("uncaught_exception", exc_info=(kind, value, tb))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        log.error(
            "uncaught_exception",
            thread=args.thread.name if args.thread else None,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    sys.excepthook = main_hook
    threading.excepthook = thread_hook
