"""The tracing toolkit: in-kernel aggregations and their printing."""
from .aggregate import Count, Histogram, Sum, log2_bucket
from .render import format_count, format_hist, format_value

__all__ = ["Count", "Histogram", "Sum", "log2_bucket", "format_count", "format_hist", "format_value"]
