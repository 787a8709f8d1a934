"""The sandbox: one fresh V8 isolate (mini-racer) per JQL request.

What a script can reach is what the isolate's global object holds: the ECMAScript
built-ins, our runtime (`runtime.js`: `Events`, `People`, `join`, `mixpanel`), the `_`
helpers (`underscore.js`) and `params`. mini-racer embeds bare V8, without Node or a
browser: there is no `require`, `process`, `fetch`, file or socket API; its own timer
functions and `WebAssembly` are removed before the script runs. Nothing of the host process is exposed
(no Python callbacks are registered).

Limits (`JqlLimits`): the wall-clock deadline of the whole request bounds every call
into the isolate (V8 terminates the running script when it passes); the isolate's heap
is capped (`set_hard_memory_limit`; a breach terminates it and the isolate is dropped);
the answer's JSON text is capped in bytes. Each breach is a 400 naming the limit and its
setting. Script errors are 400s naming the line and column in the script.

Every call blocks: `Sandbox` methods are meant to run in a worker thread.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from py_mini_racer import (
    JSEvalException,
    JSFunction,
    JSOOMException,
    JSParseException,
    JSTimeoutException,
    MiniRacer,
)

from footfall.shared.errors import ParamError

__all__ = ["JqlLimitError", "JqlLimits", "JqlScriptError", "NeedsProperties", "Sandbox"]

_HERE = Path(__file__).parent
_RUNTIME = (_HERE / "runtime.js").read_text() + "\n//# sourceURL=jql-runtime.js\n"
_UNDERSCORE = (_HERE / "underscore.js").read_text() + "\n//# sourceURL=jql-underscore.js\n"
_SCRIPT_NAME = "script.js"
# Host functions that mini-racer installs and scripts have no use for.
_CLEANUP = (
    "delete globalThis.setTimeout; delete globalThis.clearTimeout; delete globalThis.__timer_manager;"
    " delete globalThis.WebAssembly; 0"
)
_LOCATION = re.compile(re.escape(_SCRIPT_NAME) + r":(\d+)(?::(\d+))?")
_HEADLINE = re.compile(r"^[^\n]*?:\d+: (.*)$")


@dataclass(frozen=True)
class JqlLimits:
    """Per request: wall-clock seconds, the isolate's heap, and the answer's JSON bytes."""

    timeout_seconds: float = 120.0
    memory_mb: int = 512
    max_output_bytes: int = 100 * 1024 * 1024


class JqlScriptError(ParamError):
    """The script failed to parse or threw (a 400 naming line and column)."""


class JqlLimitError(ParamError):
    """A limit was exceeded (a 400 naming the limit)."""


class NeedsProperties(Exception):
    """The script reached an event property beyond the projected keys in a run fed without the
    properties texts: the request must run again with them (a fresh isolate)."""


def timeout_error(limits: JqlLimits) -> JqlLimitError:
    return JqlLimitError(
        f"Timeout Error: the script ran longer than {limits.timeout_seconds:g} s (FOOTFALL_JQL_TIMEOUT_SECONDS)"
    )


def _script_message(exc: JSEvalException) -> str:
    """`<message> (line L, column C)` in the user's script, from V8's report."""
    text = str(exc)
    lines = text.splitlines()
    headline = lines[0] if lines else text
    match = _HEADLINE.match(headline)
    message = match.group(1) if match else headline
    message = message.removeprefix("JqlError: ")
    if isinstance(exc, JSParseException):
        # The script is evaluated alone, so the reported line is the script's; the caret
        # under the quoted source line shows the column.
        line_match = re.match(r"^[^\n]*?:(\d+): ", headline)
        caret = lines[2] if len(lines) > 2 and lines[2].strip() == "^" else None
        if line_match is None:
            return message
        column = f", column {caret.index('^') + 1}" if caret is not None else ""
        return f"{message} (line {line_match.group(1)}{column})"
    found = _LOCATION.findall(text)
    with_column = [f for f in found if f[1]]
    if with_column:
        return f"{message} (line {with_column[0][0]}, column {with_column[0][1]})"
    if found:
        return f"{message} (line {found[0][0]})"
    return message


class Sandbox:
    """A V8 isolate with the runtime loaded; `close()` releases it."""

    def __init__(self, limits: JqlLimits, started: float | None = None) -> None:
        self.limits = limits
        self.deadline = (started if started is not None else time.monotonic()) + limits.timeout_seconds
        self._ctx = MiniRacer()
        self._feed_events: JSFunction | None = None
        self._without_texts = False  # fed events without their properties texts (`feed_events`)
        self._ctx.set_hard_memory_limit(limits.memory_mb * 1024 * 1024)
        self._eval(_RUNTIME)
        self._eval(_UNDERSCORE)
        self._eval(_CLEANUP)

    def close(self) -> None:
        self._feed_events = None  # its handle belongs to the context
        self._ctx.close()

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise timeout_error(self.limits)
        return left

    def _eval(self, code: str) -> object:
        return self._guard(lambda left: self._ctx.eval(code, timeout_sec=left))

    def _guard(self, call: Callable[[float], object]) -> object:
        """`call(seconds left)` into the isolate, its failures as the request's 400s."""
        try:
            return call(self.remaining())
        except JSTimeoutException:
            raise timeout_error(self.limits) from None
        except JSOOMException:
            raise JqlLimitError(
                f"Memory limit exceeded: the script used more than {self.limits.memory_mb} MB (FOOTFALL_JQL_MEMORY_MB)"
            ) from None
        except JSEvalException as exc:
            if self._ctx.was_hard_memory_limit_reached():
                raise JqlLimitError(
                    f"Memory limit exceeded: the script used more than {self.limits.memory_mb} MB"
                    " (FOOTFALL_JQL_MEMORY_MB)"
                ) from None
            raise JqlScriptError(_script_message(exc)) from None

    def load(self, script: str, params_json: str) -> None:
        """Define `params` and run the script's top level (sloppy mode: it may assign
        undeclared globals)."""
        self._eval(f"globalThis.params = JSON.parse({_js_string(params_json)}); 0")
        self._eval(script + f"\n;0\n//# sourceURL={_SCRIPT_NAME}\n")

    def plan(self) -> str:
        """Call `main()`; the JSON of its source (`{"source": ...}`)."""
        return str(self._eval("__jql_plan()"))

    def feed(self, chunk_json: str) -> int:
        """Run the streaming steps on one chunk of source items (a JSON array)."""
        result = self._eval(f"__jql_feed({_js_string(chunk_json)})")
        return int(result) if isinstance(result, int | float) else 0

    def project(self, keys: Sequence[str]) -> None:
        """The property names the warehouse reads out for `feed_events` (`projected_keys`)."""
        self._eval(f"__jql_project({_js_string(json.dumps(list(keys)))})")

    def feed_events(self, rows: Sequence[tuple[Any, ...]]) -> int:
        """Run the streaming steps on a window of events: rows `(head_json, properties)` of
        `source.events_window`, handed over as two strings (no JavaScript literal to parse, no
        per-event work in Python), or rows `(head_json,)` alone (fed without properties: the
        items answer only the projected keys, and a script reaching further raises
        `NeedsProperties`, even when it catches what the isolate throws)."""
        heads = "[" + ",".join(row[0] for row in rows) + "]"
        texts = "\0".join(row[1] for row in rows) if rows and len(rows[0]) > 1 else None
        self._without_texts = self._without_texts or texts is None
        if self._feed_events is None:
            self._feed_events = cast(JSFunction, self._eval("__jql_feed_events"))
        fn = self._feed_events
        result = self._watching(lambda left: fn(heads, texts, timeout_sec=left))
        return int(result) if isinstance(result, int | float) else 0

    def _watching(self, call: Callable[[float], object]) -> object:
        """`_guard(call)`, raising `NeedsProperties` when the call reached a property that
        was not fed (the runtime's flag: a script may catch the exception thrown there).
        Only an isolate fed without texts can have missed one."""
        if not self._without_texts:
            return self._guard(call)
        try:
            result = self._guard(call)
        except JqlScriptError:
            if self._missed():
                raise NeedsProperties from None
            raise
        if self._missed():
            raise NeedsProperties
        return result

    def _missed(self) -> bool:
        return self._guard(lambda left: self._ctx.eval("__jql_missed()", timeout_sec=left)) is True

    def grouped(self, groups_json: str) -> None:
        """Give the groups of a first `groupBy` counted by the warehouse (`[{key, value}]`)."""
        self._eval(f"__jql_grouped({_js_string(groups_json)})")

    def finish(self) -> str:
        """The final collection as JSON text, within the output limit."""
        text = str(self._watching(lambda left: self._ctx.eval("__jql_finish()", timeout_sec=left)))
        if len(text.encode()) > self.limits.max_output_bytes:
            raise JqlLimitError(
                f"Output limit exceeded: the result is larger than {self.limits.max_output_bytes} bytes"
                " (FOOTFALL_JQL_MAX_OUTPUT_BYTES)"
            )
        return text


def _js_string(text: str) -> str:
    """`text` as a JavaScript string literal (JSON's string syntax is valid JavaScript;
    U+2028/9 are escaped for older parsers)."""
    return json.dumps(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
