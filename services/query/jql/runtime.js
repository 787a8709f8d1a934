// The JQL runtime (semantics.md §5), evaluated in a fresh V8 isolate before the user's script.
// Sources record what to read; the Python host reads it from the warehouse and feeds the
// rows in chunks (__jql_feed); streaming steps (filter, map, flatten) run per chunk, the
// first grouping step accumulates, and everything after it runs on its (small) output.
(function (global) {
  "use strict";

  function JqlError(message) {
    this.name = "JqlError";
    this.message = message;
  }
  JqlError.prototype = Object.create(Error.prototype);
  function fail(message) {
    throw new JqlError(message);
  }

  // -- accessors ---------------------------------------------------------------------------
  function pathGetter(path) {
    var parts = String(path).split(".");
    return function (item) {
      var value = item;
      for (var i = 0; i < parts.length; i++) {
        if (value === null || value === undefined || typeof value !== "object") return undefined;
        value = value[parts[i]];
      }
      return value;
    };
  }
  function accessor(spec, what) {
    if (spec === undefined || spec === null) return function (item) { return item; };
    if (typeof spec === "function") return spec;
    if (typeof spec === "string") return pathGetter(spec);
    if (spec && spec.__jql_multiple) return accessor(spec.inner, what);
    fail(what + ": an accessor is a property path (string) or a function");
  }
  function toNumber(value) {
    if (typeof value === "number") return isFinite(value) ? value : undefined;
    if (typeof value === "boolean") return value ? 1 : 0;
    if (typeof value === "string" && /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(value)) return Number(value);
    return undefined;
  }

  // -- ordering of keys and values ---------------------------------------------------------
  function rank(v) {
    if (v === null || v === undefined) return 0;
    switch (typeof v) {
      case "boolean": return 1;
      case "number": return 2;
      case "string": return 3;
      default: return Array.isArray(v) ? 4 : 5;
    }
  }
  function compare(a, b) {
    var ra = rank(a), rb = rank(b);
    if (ra !== rb) return ra - rb;
    if (ra === 0) return 0;
    if (ra === 4) {
      for (var i = 0; i < a.length && i < b.length; i++) {
        var c = compare(a[i], b[i]);
        if (c !== 0) return c;
      }
      return a.length - b.length;
    }
    if (ra === 5) {
      var sa = JSON.stringify(a), sb = JSON.stringify(b);
      return sa < sb ? -1 : sa > sb ? 1 : 0;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }
  function scalarKey(v) {
    return v === undefined ? null : v;
  }

  // -- reducers: fn(accumulators, items); the built-ins keep an inner state, finished once --
  function builtin(init, step, merge, finish) {
    var fn = function (accs, items) {
      var state = init();
      for (var i = 0; i < accs.length; i++) state = merge(state, accs[i] && accs[i].__jql_state ? accs[i].s : accs[i]);
      for (var j = 0; j < items.length; j++) state = step(state, items[j]);
      return { __jql_state: true, s: state };
    };
    fn.__jql_finish = function (acc) { return finish(acc && acc.__jql_state ? acc.s : acc); };
    return fn;
  }
  function named(name, fn, acc) {
    fn.__jql_name = name;
    if (typeof acc === "string") fn.__jql_path = acc; // a plain path: the host may compute it in SQL
    return fn;
  }
  function finishOf(reducer) {
    return reducer.__jql_finish || function (v) { return v; };
  }
  function numberOf(acc) {
    var get = accessor(acc, "reducer");
    return function (item) { return toNumber(get(item)); };
  }
  function identity(v) { return v; }

  var reducer = {
    count: function () {
      return named("count", builtin(function () { return 0; }, function (s) { return s + 1; },
        function (s, a) { return s + (toNumber(a) || 0); }, identity));
    },
    sum: function (acc) {
      var num = numberOf(acc);
      return named("sum", builtin(function () { return 0; }, function (s, it) { var v = num(it); return v === undefined ? s : s + v; },
        function (s, a) { return s + (toNumber(a) || 0); }, identity), acc);
    },
    avg: function (acc) {
      var num = numberOf(acc);
      return named("avg", builtin(function () { return { n: 0, sum: 0 }; },
        function (s, it) { var v = num(it); if (v !== undefined) { s.n += 1; s.sum += v; } return s; },
        function (s, a) { s.n += a.n; s.sum += a.sum; return s; },
        function (s) { return s.n ? s.sum / s.n : null; }), acc);
    },
    min: function (acc) { return named("min", extreme(acc, -1), acc); },
    max: function (acc) { return named("max", extreme(acc, 1), acc); },
    min_by: function (acc) { return extremeBy(acc, -1); },
    max_by: function (acc) { return extremeBy(acc, 1); },
    numeric_summary: function (acc) {
      var num = numberOf(acc);
      return builtin(function () { return { count: 0, sum: 0, sum_squares: 0 }; },
        function (s, it) { var v = num(it); if (v !== undefined) { s.count += 1; s.sum += v; s.sum_squares += v * v; } return s; },
        function (s, a) { s.count += a.count; s.sum += a.sum; s.sum_squares += a.sum_squares; return s; },
        function (s) {
          var avg = s.count ? s.sum / s.count : 0;
          var variance = s.count ? Math.max(0, s.sum_squares / s.count - avg * avg) : 0;
          return { count: s.count, sum: s.sum, sum_squares: s.sum_squares, avg: avg, stddev: Math.sqrt(variance) };
        });
    },
    numeric_percentiles: function (acc, percentiles) {
      var num = numberOf(acc);
      var list = Array.isArray(percentiles) ? percentiles : [percentiles];
      for (var i = 0; i < list.length; i++) {
        if (typeof list[i] !== "number" || !(list[i] >= 0 && list[i] <= 100)) fail("numeric_percentiles: percentiles are numbers from 0 to 100");
      }
      return builtin(function () { return []; },
        function (s, it) { var v = num(it); if (v !== undefined) s.push(v); return s; },
        function (s, a) { for (var k = 0; k < a.length; k++) s.push(a[k]); return s; },
        function (s) {
          s.sort(function (x, y) { return x - y; });
          var out = list.map(function (p) { return { percentile: p, value: percentile(s, p) }; });
          return Array.isArray(percentiles) ? out : out[0].value;
        });
    },
    top: function (n) {
      if (typeof n !== "number" || n < 0) fail("top: n must be a non-negative number");
      function trim(s) {
        s.sort(function (a, b) { return compare(b.value, a.value) || compare(a.key, b.key); });
        return s.slice(0, n);
      }
      return builtin(function () { return []; }, function (s, it) { s.push(it); return s.length > 4 * n + 64 ? trim(s) : s; },
        function (s, a) { return s.concat(a); }, trim);
    },
    object_merge: function () {
      return builtin(function () { return {}; }, deepMerge, deepMerge, identity);
    },
    any: function () {
      return builtin(function () { return undefined; }, function (s, it) { return s === undefined ? it : s; },
        function (s, a) { return s === undefined ? a : s; }, function (s) { return s === undefined ? null : s; });
    },
    null: function () {
      return builtin(function () { return null; }, function () { return null; }, function () { return null; }, function () { return null; });
    },
  };
  function extreme(acc, sign) {
    var num = numberOf(acc);
    function better(s, v) { return v === undefined ? s : s === undefined || (v - s) * sign > 0 ? v : s; }
    return builtin(function () { return undefined; }, function (s, it) { return better(s, num(it)); }, better,
      function (s) { return s === undefined ? null : s; });
  }
  function extremeBy(acc, sign) {
    var num = numberOf(acc);
    function better(s, it) {
      var v = num(it);
      if (v === undefined) return s;
      return s === undefined || (v - s.v) * sign > 0 ? { v: v, item: it } : s;
    }
    return builtin(function () { return undefined; }, better,
      function (s, a) { return a === undefined ? s : s === undefined || (a.v - s.v) * sign > 0 ? a : s; },
      function (s) { return s === undefined ? null : s.item; });
  }
  function percentile(sorted, p) {
    if (!sorted.length) return null;
    var pos = (p / 100) * (sorted.length - 1), lo = Math.floor(pos), hi = Math.ceil(pos);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
  }
  function deepMerge(into, value) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return into;
    for (var k in value) {
      if (!Object.prototype.hasOwnProperty.call(value, k)) continue;
      var v = value[k];
      if (typeof v === "number") into[k] = (typeof into[k] === "number" ? into[k] : 0) + v;
      else if (v !== null && typeof v === "object" && !Array.isArray(v)) {
        if (into[k] === null || typeof into[k] !== "object") into[k] = {};
        deepMerge(into[k], v);
      } else if (!(k in into)) into[k] = v;
    }
    return into;
  }

  function checkReducer(r, what) {
    if (typeof r === "function") return;
    if (Array.isArray(r) && r.length && r.every(function (x) { return typeof x === "function"; })) return;
    fail(what + ": the reducer must be a function or a list of functions");
  }
  function runReducer(r, accs, items) {
    if (Array.isArray(r)) {
      return r.map(function (one, i) { return one(accs.map(function (a) { return a[i]; }), items); });
    }
    return r(accs, items);
  }
  function finishReducer(r, acc) {
    if (Array.isArray(r)) return r.map(function (one, i) { return finishOf(one)(acc[i]); });
    return finishOf(r)(acc);
  }

  // -- helpers -----------------------------------------------------------------------------
  var TIME_BUCKETS = {
    daily_time_buckets: { __jql_time: "day" },
    weekly_time_buckets: { __jql_time: "week" },
    monthly_time_buckets: { __jql_time: "month" },
    quarterly_time_buckets: { __jql_time: "quarter" },
    annual_time_buckets: { __jql_time: "year" },
  };
  function timeBucket(ms, unit) {
    var d = new Date(ms);
    var y = d.getUTCFullYear(), m = d.getUTCMonth();
    switch (unit) {
      case "day": return Date.UTC(y, m, d.getUTCDate());
      case "week": return Date.UTC(y, m, d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
      case "month": return Date.UTC(y, m, 1);
      case "quarter": return Date.UTC(y, m - (m % 3), 1);
      default: return Date.UTC(y, 0, 1);
    }
  }
  function numericBucket(acc, spec) {
    var num = numberOf(acc);
    if (spec && spec.__jql_time) {
      return function (item) { var v = num(item); return v === undefined ? undefined : timeBucket(v, spec.__jql_time); };
    }
    if (Array.isArray(spec)) {
      if (!spec.length || !spec.every(function (x) { return typeof x === "number"; })) fail("numeric_bucket: boundaries must be a list of numbers");
      var bounds = spec.slice().sort(function (a, b) { return a - b; });
      return function (item) {
        var v = num(item);
        if (v === undefined) return undefined;
        if (v < bounds[0]) return undefined; // below the first boundary: no bucket
        var lo = bounds[0];
        for (var i = 0; i < bounds.length && bounds[i] <= v; i++) lo = bounds[i];
        return lo;
      };
    }
    if (spec && typeof spec.bucket_size === "number" && spec.bucket_size > 0) {
      var size = spec.bucket_size, offset = typeof spec.offset === "number" ? spec.offset : 0;
      return function (item) { var v = num(item); return v === undefined ? undefined : offset + Math.floor((v - offset) / size) * size; };
    }
    fail("numeric_bucket: buckets are a list of boundaries, {bucket_size, offset} or a mixpanel.*_time_buckets constant");
  }
  var mixpanel = {
    reducer: reducer,
    numeric_bucket: numericBucket,
    to_number: function (acc) { var get = accessor(acc, "to_number"); return function (item) { return toNumber(get(item)); }; },
    multiple_keys: function (acc) { return { __jql_multiple: true, inner: acc }; },
    slice: function (acc, start, limit) {
      var get = accessor(acc, "slice");
      var f = function (item) {
        var v = get(item);
        if (!Array.isArray(v) && typeof v !== "string") return v;
        return limit === undefined ? v.slice(start) : v.slice(start, start + limit);
      };
      f.__jql_spread = true; // as a group key: its elements are key parts
      return f;
    },
  };
  for (var name in TIME_BUCKETS) mixpanel[name] = TIME_BUCKETS[name];

  // -- grouping ----------------------------------------------------------------------------
  function keyFns(keys, what) {
    if (keys === undefined || keys === null) keys = [];
    if (!Array.isArray(keys)) keys = [keys];
    return keys.map(function (k) {
      return { get: accessor(k, what), multiple: !!(k && k.__jql_multiple), spread: !!(k && k.__jql_spread) };
    });
  }
  function keysOf(fns, item, prefix) {
    var out = [prefix.slice()];
    for (var i = 0; i < fns.length; i++) {
      var v = fns[i].get(item);
      if (fns[i].spread && Array.isArray(v)) {
        out = out.map(function (k) { return k.concat(v.map(scalarKey)); });
        continue;
      }
      var values = fns[i].multiple && Array.isArray(v) ? v : [v];
      var next = [];
      for (var a = 0; a < out.length; a++) for (var b = 0; b < values.length; b++) next.push(out[a].concat([scalarKey(values[b])]));
      out = next;
    }
    return out;
  }
  // One window's items by the JSON text of their group key (with the distinct_id first for
  // groupByUser): each entry holds the key and its items, in arrival order.
  function byKey(fns, items, byUser) {
    var batch = new Map();
    for (var i = 0; i < items.length; i++) {
      var ks = keysOf(fns, items[i], byUser ? [items[i].distinct_id] : []);
      for (var j = 0; j < ks.length; j++) {
        var text = JSON.stringify(ks[j]), entry = batch.get(text);
        if (!entry) batch.set(text, (entry = { key: ks[j], items: [] }));
        entry.items.push(items[i]);
      }
    }
    return batch;
  }
  function Grouper(keys, red, what) {
    checkReducer(red, what);
    var fns = keyFns(keys, what), groups = new Map();
    this.push = function (items) {
      byKey(fns, items, false).forEach(function (entry, text) {
        var old = groups.get(text);
        var acc = runReducer(red, old ? [old.acc] : [], entry.items);
        groups.set(text, { key: entry.key, acc: acc });
      });
    };
    this.finish = function () {
      var out = [];
      groups.forEach(function (g) { out.push({ key: g.key, value: finishReducer(red, g.acc) }); });
      out.sort(function (a, b) { return compare(a.key, b.key); });
      return out;
    };
  }
  function UserGrouper(keys, red) {
    if (typeof red !== "function") fail("groupByUser: the reducer must be a function(state, events)");
    var fns = keyFns(keys, "groupByUser"), groups = new Map();
    this.push = function (items) {
      byKey(fns, items, true).forEach(function (entry, text) {
        var old = groups.get(text);
        var state = old ? old.state : undefined;
        // A built-in reducer takes a list of accumulators; a custom one the state itself.
        if (red.__jql_finish) state = red(state === undefined ? [] : [state], entry.items);
        else state = red(state, entry.items);
        groups.set(text, { key: entry.key, state: state });
      });
    };
    this.finish = function () {
      var out = [];
      groups.forEach(function (g) { out.push({ key: g.key, value: g.state === undefined ? null : finishOf(red)(g.state) }); });
      out.sort(function (a, b) { return compare(a.key, b.key); });
      return out;
    };
  }
  function Reducer(red) {
    checkReducer(red, "reduce");
    var acc, seen = false;
    this.push = function (items) { acc = runReducer(red, seen ? [acc] : [], items); seen = true; };
    this.finish = function () {
      if (!seen) this.push([]);
      return [finishReducer(red, acc)];
    };
  }
  function Collector(finish) {
    var all = [];
    this.push = function (items) { for (var i = 0; i < items.length; i++) all.push(items[i]); };
    this.finish = function () { return finish(all); };
  }
  function sorter(acc, sign) {
    var get = accessor(acc, "sort");
    return function (all) {
      return all.map(function (it, i) { return { k: get(it), i: i, it: it }; })
        .sort(function (a, b) { return sign * compare(a.k, b.k) || a.i - b.i; })
        .map(function (x) { return x.it; });
    };
  }
  function groupLimits(limits, globalLimit) {
    if (!Array.isArray(limits) || !limits.every(function (n) { return typeof n === "number" && n >= 0; })) {
      fail("applyGroupLimits: limits must be a list of non-negative numbers");
    }
    return function (all) {
      var kept = all.filter(function (it) { return it && Array.isArray(it.key); });
      if (kept.length !== all.length) fail("applyGroupLimits: the items must be {key, value} groups");
      function total(items) {
        var s = 0;
        for (var i = 0; i < items.length; i++) s += toNumber(items[i].value) || 0;
        return s;
      }
      function limit(items, level) {
        if (level >= limits.length) return items;
        var by = new Map();
        items.forEach(function (it) {
          var text = JSON.stringify(it.key[level]);
          if (!by.has(text)) by.set(text, { k: it.key[level], items: [] });
          by.get(text).items.push(it);
        });
        var parts = [];
        by.forEach(function (p) { parts.push(p); });
        parts.sort(function (a, b) { return total(b.items) - total(a.items) || compare(a.k, b.k); });
        var out = [];
        parts.slice(0, limits[level]).forEach(function (p) { out = out.concat(limit(p.items, level + 1)); });
        return out;
      }
      var out = limit(kept, 0);
      out.sort(function (a, b) { return compare(a.key, b.key); });
      if (typeof globalLimit === "number") {
        var ranked = out.map(function (it, i) { return { it: it, i: i }; });
        ranked.sort(function (a, b) { return (toNumber(b.it.value) || 0) - (toNumber(a.it.value) || 0) || a.i - b.i; });
        var keep = new Set(ranked.slice(0, globalLimit).map(function (x) { return x.i; }));
        out = out.filter(function (it, i) { return keep.has(i); });
      }
      return out;
    };
  }

  // -- collections -------------------------------------------------------------------------
  function Collection(source, ops) {
    this.__jql_source = source;
    this.__jql_ops = ops;
  }
  function step(kind, build) {
    return function () {
      var op = build.apply(null, arguments);
      op.kind = kind;
      return new Collection(this.__jql_source, this.__jql_ops.concat([op]));
    };
  }
  function fn(f, what) {
    if (typeof f !== "function") fail(what + ": expects a function");
    return f;
  }
  Collection.prototype.filter = step("filter", function (f) { return { fn: fn(f, "filter") }; });
  Collection.prototype.map = step("map", function (f) { return { fn: fn(f, "map") }; });
  Collection.prototype.flatten = step("flatten", function () { return {}; });
  Collection.prototype.groupBy = step("groupBy", function (keys, red) {
    checkReducer(red, "groupBy");
    return { keys: keys, reducer: red, make: function () { return new Grouper(keys, red, "groupBy"); } };
  });
  Collection.prototype.groupByUser = step("groupByUser", function (keys, red) {
    if (red === undefined) { red = keys; keys = []; }
    if (typeof red !== "function") fail("groupByUser: the reducer must be a function(state, events)");
    return { keys: keys, reducer: red, make: function () { return new UserGrouper(keys, red); } };
  });
  Collection.prototype.reduce = step("reduce", function (red) {
    checkReducer(red, "reduce");
    return { reducer: red, make: function () { return new Reducer(red); } };
  });
  Collection.prototype.sortAsc = step("sort", function (acc) { var s = sorter(acc, 1); return { make: function () { return new Collector(s); } }; });
  Collection.prototype.sortDesc = step("sort", function (acc) { var s = sorter(acc, -1); return { make: function () { return new Collector(s); } }; });
  Collection.prototype.applyGroupLimits = step("limits", function (limits, g) {
    var f = groupLimits(limits, g);
    return { make: function () { return new Collector(f); } };
  });

  function streamStep(op, items) {
    switch (op.kind) {
      case "filter": return items.filter(function (it) { return op.fn(it); });
      case "map": return items.map(function (it) { return op.fn(it); });
      default: {
        var out = [];
        for (var i = 0; i < items.length; i++) {
          if (Array.isArray(items[i])) for (var j = 0; j < items[i].length; j++) out.push(items[i][j]);
          else out.push(items[i]);
        }
        return out;
      }
    }
  }
  function isStreaming(op) {
    return op.kind === "filter" || op.kind === "map" || op.kind === "flatten";
  }
  function readDate(options, name) {
    var v = options[name];
    if (typeof v !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(v)) fail("Events(): " + name + " must be a date YYYY-MM-DD");
    return v;
  }
  function selectors(list, what, withEvent) {
    if (list === undefined || list === null) return [];
    if (!Array.isArray(list)) fail(what + " must be a list");
    return list.map(function (s) {
      if (s === null || typeof s !== "object") fail(what + ": each selector is an object");
      var out = {};
      if (withEvent && s.event !== undefined) {
        if (typeof s.event !== "string") fail(what + ": event must be a string");
        out.event = s.event;
      }
      if (s.selector !== undefined && s.selector !== "") {
        if (typeof s.selector !== "string") fail(what + ": selector must be a string");
        out.selector = s.selector;
      }
      return out;
    });
  }
  function Events(options) {
    if (options === null || typeof options !== "object") fail("Events() takes {from_date, to_date, event_selectors}");
    return new Collection({
      type: "events",
      from_date: readDate(options, "from_date"),
      to_date: readDate(options, "to_date"),
      event_selectors: selectors(options.event_selectors, "event_selectors", true),
    }, []);
  }
  function People(options) {
    options = options || {};
    return new Collection({ type: "people", user_selectors: selectors(options.user_selectors, "user_selectors", false) }, []);
  }
  function join(events, people, options) {
    options = options || {};
    if (!(events instanceof Collection) || events.__jql_source.type !== "events" || events.__jql_ops.length) {
      fail("join(): the first argument must be Events(...) without transformations");
    }
    if (!(people instanceof Collection) || people.__jql_source.type !== "people" || people.__jql_ops.length) {
      fail("join(): the second argument must be People(...) without transformations");
    }
    var type = options.type === undefined ? "full" : options.type;
    if (["full", "left", "right", "inner"].indexOf(type) < 0) fail('join(): type must be "full", "left", "right" or "inner"');
    var sel = selectors(options.selectors, "join selectors", true);
    return new Collection({ type: "join", join_type: type, events: events.__jql_source, people: people.__jql_source, selectors: sel }, []);
  }

  // -- the host's entry points -------------------------------------------------------------
  var run = null;
  global.__jql_plan = function () {
    if (typeof global.main !== "function") fail("the script must define a function main()");
    var c = global.main();
    if (!(c instanceof Collection)) fail("main() must return a collection: Events(...), People(...) or join(...) with transformations");
    var ops = c.__jql_ops, barrier = ops.length;
    for (var i = 0; i < ops.length; i++) if (!isStreaming(ops[i])) { barrier = i; break; }
    for (var k = 0; k < ops.length; k++) {
      if (ops[k].kind !== "groupByUser") continue;
      for (var m = 0; m < k; m++) if (ops[m].kind !== "filter") fail("groupByUser() is allowed only on a source or after filter()");
    }
    var pushed = pushdown(c.__jql_source, ops);
    run = { ops: ops, barrier: barrier, sink: barrier < ops.length ? ops[barrier].make() : null, out: [], pushed: pushed };
    // Items need the source's time order only for groupByUser and for a collection without
    // a grouping step; groupBy and reduce promise no order to their reducers (§5.4).
    var first = barrier < ops.length ? ops[barrier].kind : null;
    var ordered = !(first === "groupBy" || first === "reduce");
    return JSON.stringify({ source: c.__jql_source, grouped: pushed, ordered: ordered, grouping: first !== null });
  };
  // A first step the host may compute in SQL (issue 13: "recognised simple pipelines"):
  // `groupBy([paths], r)`, `groupByUser([paths], count())` and `reduce(r)` on Events, and
  // `groupBy([paths], r)` on People, where every key is `name`, `distinct_id` or
  // `properties.<key>` (People: no `name`) and r is one built-in count(), or sum / avg /
  // min / max of a `properties.<key>` path. Null when the step is anything else.
  var PROPERTY_PATH = /^properties\.[^.]+$/;
  function pushdown(source, ops) {
    if ((source.type !== "events" && source.type !== "people") || !ops.length) return null;
    var op = ops[0], kind = op.kind, keys = op.keys, red = op.reducer;
    if (source.type === "people" && kind !== "groupBy") return null;
    if (kind === "reduce") keys = [];
    else if (kind === "groupByUser") {
      if (keys === undefined || keys === null) keys = [];
      if (!Array.isArray(keys) || red.__jql_name !== "count") return null;
      keys = ["distinct_id"].concat(keys);
    } else if (kind !== "groupBy" || !Array.isArray(keys) || !keys.length) return null;
    if (typeof red !== "function" || !red.__jql_finish) return null;
    var name = red.__jql_name;
    if (name !== "count" && !(["sum", "avg", "min", "max"].indexOf(name) >= 0 && PROPERTY_PATH.test(red.__jql_path || ""))) return null;
    for (var i = 0; i < keys.length; i++) {
      var k = keys[i];
      if (typeof k !== "string") return null;
      if (!(k === "distinct_id" || PROPERTY_PATH.test(k) || (k === "name" && source.type === "events"))) return null;
    }
    return { keys: keys, reducer: name, path: name === "count" ? null : red.__jql_path, reduce: kind === "reduce" };
  }
  // The first step's answer computed by the host (JSON `[{key, value}]`, or for reduce
  // `[value]`) replaces its output.
  global.__jql_grouped = function (text) {
    var groups = JSON.parse(text);
    if (!run.pushed || !run.pushed.reduce) groups.sort(function (a, b) { return compare(a.key, b.key); });
    run.sink = { push: function () {}, finish: function () { return groups; } };
    run.barrier = 0;
    return groups.length;
  };
  // -- Events items with lazily parsed properties ------------------------------------------
  // The host sends a window of events as `[name, distinct_id, time, {projected}]` heads plus
  // the stored `properties` texts (NUL-separated: NUL never occurs in JSON text). An item's
  // `properties` is a Proxy that answers the projected keys (the property names the script
  // spells out, read by the warehouse) from the head, and parses the whole text the first
  // time anything else is asked (another key, keys, `in`, JSON.stringify, a write), keeping
  // the projected values, so an object read before stays the same object. The answers are
  // those of the parsed text in every case.
  var projected = Object.create(null);
  var hasOwn = Object.prototype.hasOwnProperty;
  function LazyProps(raw, values) {
    this.raw = raw;
    this.values = values;
    this.full = null;
  }
  // Fed without the texts (the host's first try, see engine.NeedsProperties): reaching
  // beyond the projected keys sets the flag the host reads after each call, and throws.
  // The flag lives in this closure and its reader cannot be replaced by the script.
  var missed = false;
  Object.defineProperty(global, "__jql_missed", { value: function () { return missed; }, writable: false, configurable: false });
  function fullOf(t) {
    if (t.full === null) {
      if (t.raw === null) {
        missed = true;
        fail("internal: this run was fed without event properties");
      }
      var full = JSON.parse(t.raw);
      if (full === null || typeof full !== "object" || Array.isArray(full)) full = {};
      for (var k in t.values) if (hasOwn.call(t.values, k)) full[k] = t.values[k];
      t.full = full;
      t.raw = null;
      t.values = null;
    }
    return t.full;
  }
  var lazyHandler = {
    get: function (t, k) {
      if (t.full === null && typeof k === "string" && projected[k] === true) {
        return hasOwn.call(t.values, k) ? t.values[k] : undefined;
      }
      return fullOf(t)[k];
    },
    has: function (t, k) {
      if (t.full === null && typeof k === "string" && projected[k] === true) return hasOwn.call(t.values, k) || k in Object.prototype;
      return k in fullOf(t);
    },
    set: function (t, k, v) { fullOf(t)[k] = v; return true; },
    deleteProperty: function (t, k) { return delete fullOf(t)[k]; },
    ownKeys: function (t) { return Reflect.ownKeys(fullOf(t)); },
    getOwnPropertyDescriptor: function (t, k) {
      var d = Reflect.getOwnPropertyDescriptor(fullOf(t), k);
      if (d) d.configurable = true; // the proxy's target holds none of them
      return d;
    },
    defineProperty: function (t, k, d) { return Reflect.defineProperty(fullOf(t), k, d); },
    getPrototypeOf: function () { return Object.prototype; },
  };
  function lazyProperties(raw, values) {
    return new Proxy(new LazyProps(raw, values), lazyHandler);
  }
  global.__jql_project = function (text) {
    var keys = JSON.parse(text);
    projected = Object.create(null);
    for (var i = 0; i < keys.length; i++) projected[keys[i]] = true;
    return keys.length;
  };
  global.__jql_feed_events = function (heads, props) {
    var hs = JSON.parse(heads), texts = props === null ? null : props.split("\u0000"), items = new Array(hs.length);
    if (texts !== null && texts.length !== hs.length) fail("internal: " + hs.length + " events but " + texts.length + " property texts");
    for (var i = 0; i < hs.length; i++) {
      var h = hs[i];
      items[i] = { name: h[0], distinct_id: h[1], time: h[2], sampling_factor: 1, properties: lazyProperties(texts === null ? null : texts[i], h[3]) };
    }
    return feedItems(items);
  };
  global.__jql_feed = function (text) {
    return feedItems(JSON.parse(text));
  };
  function feedItems(items) {
    for (var i = 0; i < run.barrier; i++) items = streamStep(run.ops[i], items);
    if (run.sink) run.sink.push(items);
    else for (var j = 0; j < items.length; j++) run.out.push(items[j]);
    return run.out.length;
  }
  global.__jql_finish = function () {
    var items = run.sink ? run.sink.finish() : run.out;
    for (var i = run.barrier + 1; i < run.ops.length; i++) {
      var op = run.ops[i];
      if (isStreaming(op)) items = streamStep(op, items);
      else { var s = op.make(); s.push(items); items = s.finish(); }
    }
    run = null;
    return JSON.stringify(items === undefined ? [] : items, function (k, v) { return typeof v === "function" ? undefined : v; });
  };

  global.Events = Events;
  global.People = People;
  global.join = join;
  global.mixpanel = mixpanel;
  global.__JqlError = JqlError;
})(globalThis);
