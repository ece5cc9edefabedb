"""Reading a metrics dataset (Parquet, CSV or JSON lines) and refusing a bad one with a message naming the file and
the column.

Columns: topic (text), partition (integer >= 0), bytes_in_per_sec (number >= 0, the partition's write rate),
size_bytes (integer >= 0, its log size on the leader); optional: leader (broker id).
"""

from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from drover.estimator.brokers import MetricsError
from drover.models.estimate import METRIC_COLUMNS
from drover.models.units import counted

_TYPES = {"topic": "string", "partition": "int", "bytes_in_per_sec": "double", "size_bytes": "bigint", "leader": "int"}
# The columns of the metrics Drover samples itself, JSON lines (``drover.estimator.service.write_metrics``).
SAMPLED_SCHEMA = ", ".join(f"{c} {t}" for c, t in _TYPES.items())


def metrics_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if path.is_dir() or suffix == ".parquet":
        return "parquet"
    if suffix == ".csv":
        return "csv"
    if suffix in (".json", ".jsonl", ".ndjson"):
        return "json"
    raise MetricsError(f"metrics {path}: unknown format {suffix or '(no suffix)'}; use .parquet, .csv or .json")


def one_row(df: DataFrame) -> Row:
    """The row of an aggregate over no groups (Spark answers it even for no input), collected in one job: a take
    would scan the input in rounds, a job each."""
    (row,) = df.collect()
    return row


def first_row(df: DataFrame) -> Row:
    """The first row of a query known to have some: an example of the rows a count has found."""
    (row,) = df.take(1)
    return row


def read_metrics(spark: SparkSession, ref: str, sampled: bool = False) -> DataFrame:
    """The dataset with typed columns, checked: every column present, every value of the right type and not
    negative, each partition once. Raises MetricsError on the first problem. Metrics Drover sampled itself
    (``sampled``) are read with the schema they were written with and not checked again: they were made checked."""
    path = Path(ref.removeprefix("file://"))
    if sampled:
        return spark.read.schema(SAMPLED_SCHEMA).json(str(path))
    raw = _read(spark, path)
    wanted = [c for c in _TYPES if c in raw.columns]
    typed = raw.select(
        *[F.col(c).try_cast(_TYPES[c]).alias(c) for c in wanted], *[F.col(c).alias(f"_raw_{c}") for c in wanted]
    )
    _check_values(path, typed, wanted)
    return typed.select(*wanted)


def _read(spark: SparkSession, path: Path) -> DataFrame:
    """The file as it is, with every column the estimate needs; one line on a file it cannot read."""
    if not path.exists():
        raise MetricsError(f"metrics {path}: no such file or folder")
    kind = metrics_format(path)
    try:
        if kind == "csv":
            raw = spark.read.option("header", "true").option("mode", "PERMISSIVE").csv(str(path))
        elif kind == "json":
            raw = spark.read.option("mode", "PERMISSIVE").json(str(path))
        else:
            raw = spark.read.parquet(str(path))
        columns = set(raw.columns)
    except AnalysisException as e:
        raise MetricsError(f"metrics {path}: cannot be read as {kind}: {str(e).splitlines()[0]}") from None
    if "_corrupt_record" in columns:
        # Spark refuses a query of the raw file that reads the corrupt-record column alone; a cached read it allows.
        raw = raw.cache()
        bad = raw.filter(F.col("_corrupt_record").isNotNull()).count()
        if bad:
            raise MetricsError(f"metrics {path}: lines that are not JSON objects: {bad}")
    missing = [c for c in METRIC_COLUMNS if c not in columns]
    if missing:
        raise MetricsError(f"metrics {path}: missing column {', '.join(missing)} (needs {', '.join(METRIC_COLUMNS)})")
    return raw


def _check_values(path: Path, typed: DataFrame, wanted: list[str]) -> None:
    """Every value typed and not negative, each partition once: counted in one pass, with an example of the
    first problem found."""
    checks = []
    for c in wanted:
        required = c != "leader"
        unusable = F.col(c).isNull() & (F.col(f"_raw_{c}").isNotNull() | F.lit(required))
        checks.append((c, "is empty or not a " + ("text" if c == "topic" else "number"), unusable))
        if c != "topic":
            checks.append((c, "is negative", F.col(c) < 0))
    counts = typed.agg(
        *[F.sum(F.when(cond, 1).otherwise(0)).alias(f"c{i}") for i, (_, _, cond) in enumerate(checks)],
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("topic", "partition").alias("distinct"),
    )
    row = one_row(counts)
    for i, (column, problem, cond) in enumerate(checks):
        if row[f"c{i}"]:
            example = first_row(typed.filter(cond).select("topic", "partition", f"_raw_{column}"))
            where = f"{example['topic']}-{example['partition']}" if example["topic"] is not None else "a row"
            raise MetricsError(
                f"metrics {path}: column {column} {problem} in {counted(row[f'c{i}'], 'row')}, "
                f"e.g. {where}: {example[f'_raw_{column}']!r}"
            )
    if row["rows"] == 0:
        raise MetricsError(f"metrics {path}: no rows")
    if row["distinct"] != row["rows"]:
        twice = first_row(typed.groupBy("topic", "partition").count().filter("count > 1"))
        raise MetricsError(
            f"metrics {path}: columns topic, partition: {twice['topic']}-{twice['partition']} "
            f"appears {twice['count']} times"
        )
