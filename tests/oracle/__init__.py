"""Independent plain-Python reference ("oracle") for the report endpoints.

Written from shared/reference/semantics.md and decisions.md only; it shares no code with services/.
Every report function takes raw import events (duplicates included), the project's IANA time zone, the query
parameters as a dict of strings, and `now`, and returns exactly the JSON body the endpoint should return.
The interpretations of ambiguous points are listed in each module's docstring.

    segmentation.segmentation / numeric / sum_ / average      /segmentation, /numeric, /sum, /average
    events.events / top / names                               /events, /events/top, /events/names
    properties.properties / top / values                      /events/properties, .../top, .../values
    funnels.funnels(events, tz, params, funnel, now)          /funnels
    retention.retention                                       /retention
    frequency.frequency                                       /retention/addiction
    stream.stream                                             /stream/query
    expr.evaluate / where_matches / on_keys / as_number       the expression language
"""

from __future__ import annotations

from . import events, frequency, properties, retention, segmentation, stream

# Endpoint path (relative to /api/query) -> oracle function(events, tz, params, now). /funnels takes the saved
# funnel definition as an extra argument: funnels.funnels(events, tz, params, funnel, now).
REPORTS = {
    "/segmentation": segmentation.segmentation,
    "/segmentation/numeric": segmentation.numeric,
    "/segmentation/sum": segmentation.sum_,
    "/segmentation/average": segmentation.average,
    "/events": events.events,
    "/events/top": events.top,
    "/events/names": events.names,
    "/events/properties": properties.properties,
    "/events/properties/top": properties.top,
    "/events/properties/values": properties.values,
    "/retention": retention.retention,
    "/retention/addiction": frequency.frequency,
    "/stream/query": stream.stream,
}
