"""Shared-filter engines: the predicates of many subscriptions on one stream, matched together.

Each engine takes labelled predicates and matches batches of tuples (columns) to a ``(tuples, labels)``
bool matrix, exactly as :meth:`matcher.Predicate.evaluate` would tuple by tuple:

* :mod:`~matcher.filters.multi`: ``MultiMatcher``, region bitmaps over all boxes (numba), a fixed attribute
  order, an optional thread pool;
* :mod:`~matcher.filters.grouped`: ``GroupedFilter``, the grouped filters of CACQ (Madden et al.);
* :mod:`~matcher.filters.asc`: ``ASCMatcher``, Lee & Lee's attribute selection constructs with their
  two-level (macro/micro) adaptive ordering;
* :mod:`~matcher.filters.agreedy`: ``PipelinedFilter`` ordered by ``AGreedy``, Babu's adaptive ordering of
  pipelined filters (one conjunctive box);
* :mod:`~matcher.filters.adaptive`: ``AdaptiveMultiMatcher``, which measures the engines on the live stream
  and runs the cheapest.

Their numba kernels (:mod:`~matcher.filters._filter_kernels`) are imported on an engine's first match, and
:mod:`~matcher.filters.machine_load` reads /proc when imported: import the module you need.
docs/FILTERS.md describes the engines and where each wins.
"""
