"""The OpenAPI document every Footfall app publishes at `/openapi.json`.

It is generated from the routes the app serves when it is first asked for (so a route added
by any service is covered without a list to keep in step), and it uses the interface's
published schemas (`specs/*.json`, copies of the interface's OpenAPI documents, MIT) for the
operations they describe:

* a route of the `ingestion` interface takes its operation from `specs/ingestion.json` (for
  `/engage` and `/groups`, whose published document has one operation per update verb, the
  batch-update operation, which accepts every verb);
* a route of the `query` interface takes it from `specs/query.json` or `specs/export.json`,
  under each of the interface's prefixes (`/api/query`, `/api/2.0`);
* a route of the `management` interface (`/api/app/...`) from `specs/experiments.json` or
  `specs/service-accounts.json`.

A path or method the published documents do not describe (Footfall's own routes: saved
reports, cohorts, `/healthz`, `POST` for the query reports, ...) gets a generated operation:
its path parameters, a free-form body for the methods that take one, and the endpoint's
docstring as its description. Every operation documents the error answer of its interface as
its `default` response. Component names of the published documents are prefixed with the
document's name (`query.Segmentation...`) so that the five documents merge without clashes.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

__all__ = ["OPENAPI_PATH", "build_document", "openapi_endpoint"]

OPENAPI_PATH = "/openapi.json"
SPECS = Path(__file__).resolve().parent / "specs"
METHODS = ("get", "put", "post", "delete", "options", "patch")
BODY_METHODS = frozenset({"post", "put", "patch"})

# interface name -> (published document, the Footfall prefixes its paths are served under)
SOURCES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "ingestion": (("ingestion", ("",)),),
    "query": (("query", ("/api/query", "/api/2.0")), ("export", ("/api/2.0",))),
    "management": (("experiments", ("/api/app",)), ("service-accounts", ("/api/app",))),
}
# for a published path with several operations (`/engage#profile-set`, ...), the one to use
PREFERRED_FRAGMENT = "batch-update"

_ANY_JSON: dict[str, Any] = {}
ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    # `{"code", "error", "status"}`, or the form mode's `{"status": 0, "error"}` / plain `0`
    "ingestion": _ANY_JSON,
    "query": {
        "type": "object",
        "required": ["error"],
        "properties": {"request": {"type": "string"}, "error": {"type": "string"}},
    },
    "": {
        "type": "object",
        "required": ["error", "status"],
        "properties": {"error": {"type": "string"}, "status": {"type": "string"}},
    },
}
# what an interface may answer with besides JSON (ingestion: `1`/`0`, `img=1`, `callback=fn`)
ANSWER_TYPES: dict[str, tuple[str, ...]] = {
    "ingestion": ("application/json", "text/plain", "image/gif", "text/javascript"),
}
# service routes that do not answer JSON
SERVICE_TYPES: dict[str, str] = {"/metrics": "text/plain"}

_PARAM = re.compile(r"\{([^}:]+)(?::([^}]+))?\}")


# -------------------------------------------------------------------------------- published documents
@cache
def _published(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = _namespaced(orjson.loads((SPECS / f"{name}.json").read_bytes()), name)
    return loaded


def _namespaced(node: Any, name: str) -> Any:
    """`node` with every local `$ref` pointing at the component renamed `<name>.<component>`."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/components/"):
                _, _, kind, component = value.split("/", 3)
                out[key] = f"#/components/{kind}/{name}.{component}"
            else:
                out[key] = _namespaced(value, name)
        return out
    if isinstance(node, list):
        return [_namespaced(item, name) for item in node]
    return node


def _shape(path: str) -> str:
    """A path with its parameter names erased: `/a/{x}/b` and `/a/{y:int}/b` are the same route."""
    return _PARAM.sub("{}", path.split("#", 1)[0].rstrip("/") or "/")


def _published_operations(interface: str) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(path shape under Footfall, method) -> (document name, operation), for one interface."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, prefixes in SOURCES.get(interface, ()):
        for raw_path, item in _published(name)["paths"].items():
            preferred = "#" not in raw_path or raw_path.endswith(PREFERRED_FRAGMENT)
            for prefix in prefixes:
                for method in METHODS:
                    if method not in item:
                        continue
                    key = (_shape(prefix + raw_path), method)
                    if key not in found or preferred:
                        found[key] = (name, item[method])
    return found


# -------------------------------------------------------------------------------------------- routes
def _served(routes: Iterable[BaseRoute], prefix: str = "") -> list[tuple[str, list[str], Route]]:
    """(path, methods, route) for every route, mounts flattened; a `…/` alias is left out when
    the path without the slash is served too."""
    flat: list[tuple[str, list[str], Route]] = []
    for route in routes:
        if isinstance(route, Mount):
            flat.extend(_served(route.routes, prefix + route.path))
        elif isinstance(route, Route):
            methods = sorted(m.lower() for m in (route.methods or {"GET"}) if m.lower() in METHODS)
            flat.append((prefix + route.path, methods, route))
    paths = {path for path, _, _ in flat}
    return [entry for entry in flat if not (entry[0].endswith("/") and entry[0].rstrip("/") in paths)]


def _openapi_path(path: str) -> str:
    """`/a/{x:int}` -> `/a/{x}`."""
    return _PARAM.sub(lambda m: "{" + m.group(1) + "}", path)


def _path_parameters(path: str) -> list[dict[str, Any]]:
    out = []
    for name, convertor in _PARAM.findall(path):
        schema: dict[str, Any] = {"type": "integer", "minimum": 0} if convertor == "int" else {"type": "string"}
        if convertor == "float":
            schema = {"type": "number"}
        out.append({"in": "path", "name": name, "required": True, "schema": schema})
    return out


def _description(route: Route) -> str:
    doc = inspect.getdoc(route.endpoint) or ""
    return doc.strip()


def _generated(path: str, method: str, route: Route) -> dict[str, Any]:
    media = SERVICE_TYPES.get(path, "application/json")
    answer = {"description": "The answer.", "content": {media: {"schema": _ANY_JSON}}}
    if method == "options":
        answer = {"description": "A CORS preflight answer (no body)."}
    operation: dict[str, Any] = {
        "summary": f"{method.upper()} {_openapi_path(path)}",
        "responses": {"204" if method == "options" else "200": answer},
    }
    description = _description(route)
    if description:
        operation["description"] = description
    if method in BODY_METHODS:
        operation["requestBody"] = {
            "required": False,
            "content": {
                "application/json": {"schema": _ANY_JSON},
                "application/x-www-form-urlencoded": {"schema": {"type": "object"}},
            },
        }
    return operation


def _with_path(operation: dict[str, Any], path: str, components: Mapping[str, Any]) -> dict[str, Any]:
    """The published operation with its path parameters named as Footfall's route names them."""
    operation = copy.deepcopy(operation)
    kept = []
    for parameter in operation.get("parameters", []):
        resolved = _resolve(parameter, components)
        if resolved.get("in") != "path":
            kept.append(parameter)
    operation["parameters"] = _path_parameters(path) + kept
    if not operation["parameters"]:
        del operation["parameters"]
    return operation


def _resolve(node: Mapping[str, Any], components: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    _, _, kind, name = ref.split("/", 3)
    target = components.get(kind, {}).get(name, {})
    return target if isinstance(target, Mapping) else {}


def _widened(responses: Mapping[str, Any], media_types: Sequence[str], components: Mapping[str, Any]) -> dict[str, Any]:
    """`responses` with every media type the interface may answer with (the published schema
    kept where there is one): its answer's type follows the request's flags, not the status."""
    out: dict[str, Any] = {}
    for status, response in responses.items():
        resolved = copy.deepcopy(dict(_resolve(response, components)))
        if status == "204":
            out[status] = resolved
            continue
        content = resolved.setdefault("content", {})
        for media in media_types:
            content.setdefault(media, {"schema": _ANY_JSON})
        out[status] = resolved
    return out


def _interface_of(path: str, interfaces: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    for name, prefixes in interfaces:
        if any(path == p.rstrip("/") or path.startswith(p) for p in prefixes):
            return name
    return ""


def _error_response(interface: str) -> dict[str, Any]:
    schema = ERROR_SCHEMAS.get(interface, ERROR_SCHEMAS[""])
    types = ANSWER_TYPES.get(interface, ("application/json",))
    return {
        "description": f"An error, in the {interface or 'service'} interface's shape.",
        "content": {media: {"schema": schema} for media in types},
    }


# ------------------------------------------------------------------------------------------ document
def build_document(
    routes: Iterable[BaseRoute],
    interfaces: Sequence[tuple[str, tuple[str, ...]]],
    *,
    title: str = "Footfall",
    version: str = "0",
) -> dict[str, Any]:
    """The OpenAPI 3.0 document of `routes`. `interfaces`: (name, path prefixes) of the
    interfaces the app serves, as in `footfall.shared.web.Interface`."""
    components: dict[str, dict[str, Any]] = {}
    used_documents: set[str] = set()
    published: dict[str, dict[tuple[str, str], tuple[str, dict[str, Any]]]] = {}
    for name, _ in interfaces:
        published[name] = _published_operations(name)
        for document, _prefixes in SOURCES.get(name, ()):
            used_documents.add(document)
    for document in sorted(used_documents):
        for kind, entries in _published(document).get("components", {}).items():
            target = components.setdefault(kind, {})
            for key, value in entries.items():
                target[key if kind == "securitySchemes" else f"{document}.{key}"] = value

    paths: dict[str, dict[str, Any]] = {}
    for path, methods, route in _served(routes):
        interface = _interface_of(path, interfaces)
        item = paths.setdefault(_openapi_path(path), {})
        for method in methods:
            match = published.get(interface, {}).get((_shape(path), method))
            if match is not None:
                operation = _with_path(match[1], path, components)
                operation.setdefault("tags", []).insert(0, interface)
            else:
                operation = _generated(path, method, route)
                operation["parameters"] = _path_parameters(path)
                if not operation["parameters"]:
                    del operation["parameters"]
                operation["tags"] = [interface or "service"]
            published_id = operation.pop("operationId", None)
            if published_id:
                operation["x-published-operation-id"] = published_id
            operation["operationId"] = f"{method}{_openapi_path(path)}"
            operation.setdefault("responses", {}).setdefault("default", _error_response(interface))
            if interface in ANSWER_TYPES:
                operation["responses"] = _widened(operation["responses"], ANSWER_TYPES[interface], components)
            item[method] = operation
    return {
        "openapi": "3.0.3",
        "info": {
            "title": title,
            "version": version,
            "description": "Generated from the routes this Footfall process serves, with the published "
            "schemas of the interface where they apply.",
        },
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": components,
    }


def openapi_endpoint(interfaces: Sequence[tuple[str, tuple[str, ...]]], *, title: str = "Footfall") -> Any:
    """The `/openapi.json` endpoint of an app: built once, from the app's routes, off the loop."""
    built: list[bytes] = []

    async def openapi(request: Request) -> Response:
        """This document."""
        if not built:
            routes = list(request.app.routes)
            document = await run_in_threadpool(build_document, routes, interfaces, title=title, version=_version())
            built.append(orjson.dumps(document))
        return Response(built[0], media_type="application/json")

    return openapi


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("footfall")
    except PackageNotFoundError:
        return "0"
