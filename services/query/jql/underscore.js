// The small `_` helper set that common JQL scripts call (Underscore/Lodash names), written
// for Footfall: collections are arrays or plain objects; iteratees are functions or
// property names.
(function (global) {
  "use strict";
  var has = function (o, k) { return o !== null && o !== undefined && Object.prototype.hasOwnProperty.call(o, k); };
  function iteratee(f) {
    if (f === undefined || f === null) return function (v) { return v; };
    if (typeof f === "function") return f;
    if (typeof f === "object") {
      return function (v) { for (var k in f) if (!v || v[k] !== f[k]) return false; return true; };
    }
    return function (v) { return v === null || v === undefined ? undefined : v[f]; };
  }
  function entries(c) {
    if (Array.isArray(c) || typeof c === "string") return Array.prototype.map.call(c, function (v, i) { return [i, v]; });
    if (c === null || c === undefined) return [];
    return Object.keys(c).map(function (k) { return [k, c[k]]; });
  }
  var _ = {};
  _.identity = function (v) { return v; };
  _.each = _.forEach = function (c, f) { entries(c).forEach(function (e) { f(e[1], e[0], c); }); return c; };
  _.map = function (c, f) { f = iteratee(f); return entries(c).map(function (e) { return f(e[1], e[0], c); }); };
  _.filter = _.select = function (c, f) { f = iteratee(f); return entries(c).filter(function (e) { return f(e[1], e[0], c); }).map(function (e) { return e[1]; }); };
  _.reject = function (c, f) { f = iteratee(f); return _.filter(c, function (v, k) { return !f(v, k, c); }); };
  _.reduce = _.foldl = _.inject = function (c, f, memo) {
    var es = entries(c), i = 0;
    if (arguments.length < 3) { if (!es.length) throw new TypeError("reduce of an empty collection with no initial value"); memo = es[0][1]; i = 1; }
    for (; i < es.length; i++) memo = f(memo, es[i][1], es[i][0], c);
    return memo;
  };
  _.find = _.detect = function (c, f) { f = iteratee(f); var es = entries(c); for (var i = 0; i < es.length; i++) if (f(es[i][1], es[i][0], c)) return es[i][1]; return undefined; };
  _.some = _.any = function (c, f) { f = iteratee(f); return entries(c).some(function (e) { return !!f(e[1], e[0], c); }); };
  _.every = _.all = function (c, f) { f = iteratee(f); return entries(c).every(function (e) { return f(e[1], e[0], c); }); };
  _.keys = function (o) { return o === null || typeof o !== "object" ? [] : Object.keys(o); };
  _.values = function (o) { return _.keys(o).map(function (k) { return o[k]; }); };
  _.pairs = _.toPairs = function (o) { return _.keys(o).map(function (k) { return [k, o[k]]; }); };
  _.object = _.fromPairs = function (list, values) {
    var out = {};
    (list || []).forEach(function (p, i) { if (values) out[p] = values[i]; else out[p[0]] = p[1]; });
    return out;
  };
  _.pluck = function (c, k) { return _.map(c, function (v) { return v === null || v === undefined ? undefined : v[k]; }); };
  _.contains = _.includes = function (c, v) { return _.values(Array.isArray(c) ? Object.assign({}, c) : c).indexOf(v) >= 0 || (typeof c === "string" && c.indexOf(v) >= 0); };
  _.size = function (c) { return c === null || c === undefined ? 0 : Array.isArray(c) || typeof c === "string" ? c.length : Object.keys(c).length; };
  _.isEmpty = function (c) { return _.size(c) === 0; };
  _.first = _.head = function (a, n) { a = a || []; return n === undefined ? a[0] : a.slice(0, n); };
  _.last = function (a, n) { a = a || []; return n === undefined ? a[a.length - 1] : a.slice(Math.max(0, a.length - n)); };
  _.rest = _.tail = function (a, n) { return (a || []).slice(n === undefined ? 1 : n); };
  _.range = function (start, stop, stepSize) {
    if (stop === undefined) { stop = start || 0; start = 0; }
    stepSize = stepSize || 1;
    var out = [];
    for (var v = start; stepSize > 0 ? v < stop : v > stop; v += stepSize) out.push(v);
    return out;
  };
  _.flatten = function (a, shallow) {
    var out = [];
    (a || []).forEach(function (v) {
      if (Array.isArray(v)) { var inner = shallow ? v : _.flatten(v); for (var i = 0; i < inner.length; i++) out.push(inner[i]); }
      else out.push(v);
    });
    return out;
  };
  _.uniq = _.unique = function (a, f) {
    f = iteratee(f); var seen = [], out = [];
    (a || []).forEach(function (v) { var k = f(v); if (seen.indexOf(k) < 0) { seen.push(k); out.push(v); } });
    return out;
  };
  _.union = function () { return _.uniq(_.flatten(Array.prototype.slice.call(arguments), true)); };
  _.intersection = function (a) {
    var rest = Array.prototype.slice.call(arguments, 1);
    return _.uniq(a).filter(function (v) { return rest.every(function (r) { return r.indexOf(v) >= 0; }); });
  };
  _.difference = function (a) {
    var rest = _.flatten(Array.prototype.slice.call(arguments, 1), true);
    return (a || []).filter(function (v) { return rest.indexOf(v) < 0; });
  };
  _.without = function (a) { var rest = Array.prototype.slice.call(arguments, 1); return (a || []).filter(function (v) { return rest.indexOf(v) < 0; }); };
  _.compact = function (a) { return (a || []).filter(function (v) { return !!v; }); };
  _.zip = function () {
    var lists = Array.prototype.slice.call(arguments), n = Math.max.apply(null, lists.map(function (l) { return l.length; }).concat([0]));
    return _.range(n).map(function (i) { return lists.map(function (l) { return l[i]; }); });
  };
  function sortKey(f) { f = iteratee(f); return function (a, b) { var x = f(a), y = f(b); return x < y ? -1 : x > y ? 1 : 0; }; }
  _.sortBy = function (c, f) {
    var cmp = sortKey(f);
    return _.values(Array.isArray(c) ? Object.assign({}, c) : c).map(function (v, i) { return { v: v, i: i }; })
      .sort(function (a, b) { return cmp(a.v, b.v) || a.i - b.i; }).map(function (x) { return x.v; });
  };
  function grouper(add) {
    return function (c, f) {
      f = iteratee(f); var out = {};
      entries(c).forEach(function (e) { add(out, f(e[1], e[0], c), e[1]); });
      return out;
    };
  }
  _.groupBy = grouper(function (o, k, v) { (has(o, k) ? o[k] : (o[k] = [])).push(v); });
  _.countBy = grouper(function (o, k) { o[k] = (has(o, k) ? o[k] : 0) + 1; });
  _.indexBy = _.keyBy = grouper(function (o, k, v) { o[k] = v; });
  _.max = function (c, f) { f = iteratee(f); var best, bv = -Infinity; _.each(c, function (v) { var x = f(v); if (x > bv) { bv = x; best = v; } }); return best === undefined ? -Infinity : best; };
  _.min = function (c, f) { f = iteratee(f); var best, bv = Infinity; _.each(c, function (v) { var x = f(v); if (x < bv) { bv = x; best = v; } }); return best === undefined ? Infinity : best; };
  _.sum = function (a) { return (a || []).reduce(function (s, v) { return s + v; }, 0); };
  _.mapObject = _.mapValues = function (o, f) { f = iteratee(f); var out = {}; _.keys(o).forEach(function (k) { out[k] = f(o[k], k, o); }); return out; };
  _.extend = _.assign = function (target) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) Object.assign(target, arguments[i]); return target; };
  _.defaults = function (target) { for (var i = 1; i < arguments.length; i++) for (var k in arguments[i]) if (target[k] === undefined) target[k] = arguments[i][k]; return target; };
  _.pick = function (o) { var ks = _.flatten(Array.prototype.slice.call(arguments, 1)), out = {}; ks.forEach(function (k) { if (has(o, k)) out[k] = o[k]; }); return out; };
  _.omit = function (o) { var ks = _.flatten(Array.prototype.slice.call(arguments, 1)), out = {}; _.keys(o).forEach(function (k) { if (ks.indexOf(k) < 0) out[k] = o[k]; }); return out; };
  _.has = function (o, k) { return has(o, k); };
  _.clone = function (o) { return Array.isArray(o) ? o.slice() : o !== null && typeof o === "object" ? Object.assign({}, o) : o; };
  _.isArray = Array.isArray;
  _.isObject = function (v) { return v !== null && (typeof v === "object" || typeof v === "function"); };
  _.isString = function (v) { return typeof v === "string"; };
  _.isNumber = function (v) { return typeof v === "number"; };
  _.isBoolean = function (v) { return typeof v === "boolean"; };
  _.isFunction = function (v) { return typeof v === "function"; };
  _.isUndefined = function (v) { return v === undefined; };
  _.isNull = function (v) { return v === null; };
  _.isEqual = function (a, b) { return JSON.stringify(a) === JSON.stringify(b); };
  global._ = _;
})(globalThis);
