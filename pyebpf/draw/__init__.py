"""Drawing and printing of plain data, for the language, the recipes and the
profiler alike: histogram buckets (:mod:`.buckets`), bpftrace's text layouts
of counts, histograms and printf (:mod:`.render`), aggregations' results as
text, tables and JSON (:mod:`.formatting`), and pictures -- folded stacks
(:mod:`.folded`), flame graphs (:mod:`.flamegraph`), speedscope files
(:mod:`.speedscope`), charts (:mod:`.chart`) and the writer choosing by a
file's extension (:mod:`.output`).  No kernel: pure functions of their
input.  Names are imported on first use.

- a *stack profile* is a mapping ``{(root, ..., leaf): samples}`` of frame
  names (strings), the outermost frame first;
- a *histogram* is a mapping ``{bucket: count}`` (log2 buckets as
  :func:`~pyebpf.draw.buckets.log2_bucket` numbers them, or linear ones
  with a label function).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # (what __getattr__ imports on first use, as type checkers see it)
    from .buckets import (LOG2_BUCKETS as LOG2_BUCKETS, LHIST_MAX_BUCKETS as LHIST_MAX_BUCKETS,
                          log2_bucket as log2_bucket, log2_bucket_range as log2_bucket_range,
                          linear_buckets as linear_buckets,
                          linear_bucket_range as linear_bucket_range)
    from .formatting import (format_text as format_text, format_table as format_table,
                             json_objects as json_objects, key_text as key_text,
                             AggregateLike as AggregateLike, KeyPart as KeyPart,
                             AggValue as AggValue, AggResult as AggResult)
    from .folded import (Stacks as Stacks, folded_frame as folded_frame, folded_text as folded_text,
                         parse_folded as parse_folded, merge as merge)
    from .flamegraph import (flamegraph_svg as flamegraph_svg, layout as layout, Frame as Frame,
                             WIDTH as WIDTH, FRAME_HEIGHT as FRAME_HEIGHT, MIN_WIDTH as MIN_WIDTH)
    from .speedscope import (speedscope_json as speedscope_json,
                             speedscope_document as speedscope_document, SCHEMA as SCHEMA)
    from .chart import (histogram_svg as histogram_svg)
    from .output import (FORMATS as FORMATS, ProfileWriteError as ProfileWriteError,
                         format_of as format_of, write_profile as write_profile,
                         write_histogram as write_histogram, write_text as write_text,
                         write_fallback as write_fallback)
else:
    from .._lazy import lazy_dir, lazy_getattr
    _LAZY = {"LOG2_BUCKETS": "buckets", "LHIST_MAX_BUCKETS": "buckets", "log2_bucket": "buckets",
             "log2_bucket_range": "buckets", "linear_buckets": "buckets",
             "linear_bucket_range": "buckets", "format_text": "formatting",
             "format_table": "formatting", "json_objects": "formatting", "key_text": "formatting",
             "AggregateLike": "formatting", "KeyPart": "formatting", "AggValue": "formatting",
             "AggResult": "formatting", "Stacks": "folded", "folded_frame": "folded",
             "folded_text": "folded", "parse_folded": "folded", "merge": "folded",
             "flamegraph_svg": "flamegraph", "layout": "flamegraph", "Frame": "flamegraph",
             "WIDTH": "flamegraph", "FRAME_HEIGHT": "flamegraph", "MIN_WIDTH": "flamegraph",
             "speedscope_json": "speedscope", "speedscope_document": "speedscope",
             "SCHEMA": "speedscope", "histogram_svg": "chart", "FORMATS": "output",
             "ProfileWriteError": "output", "format_of": "output",
             "write_profile": "output", "write_histogram": "output", "write_text": "output",
             "write_fallback": "output"}
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["LOG2_BUCKETS", "LHIST_MAX_BUCKETS", "log2_bucket", "log2_bucket_range",
           "linear_buckets", "linear_bucket_range", "format_text", "format_table", "json_objects",
           "key_text", "AggregateLike", "KeyPart", "AggValue", "AggResult", "Stacks",
           "folded_frame", "folded_text", "parse_folded", "merge", "flamegraph_svg", "layout",
           "Frame", "WIDTH", "FRAME_HEIGHT", "MIN_WIDTH", "speedscope_json", "speedscope_document",
           "SCHEMA", "histogram_svg", "FORMATS", "ProfileWriteError", "format_of",
           "write_profile", "write_histogram", "write_text", "write_fallback"]
