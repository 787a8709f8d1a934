"""`footfall.shared.openapi.build_document` on a route table: coverage, published operations,
path parameters and references (pure: the published documents are package data)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from footfall.shared.openapi import build_document

INTERFACES = [
    ("ingestion", ("/import", "/track", "/engage", "/groups")),
    ("query", ("/api/query/", "/api/2.0/")),
    ("management", ("/api/app/",)),
]


async def endpoint(request: Request) -> Response:
    """Does a thing.

    At length."""
    return Response()


def routes() -> list[Any]:
    return [
        Route("/import", endpoint, methods=["GET", "POST"]),
        Route("/import/", endpoint, methods=["GET", "POST"]),
        Route("/track", endpoint, methods=["GET", "POST", "OPTIONS"]),
        Route("/api/2.0/segmentation", endpoint, methods=["GET", "POST"]),
        Route("/api/query/segmentation", endpoint, methods=["GET", "POST"]),
        Route("/api/2.0/export", endpoint, methods=["GET"]),
        Route("/api/app/projects/{project_id:int}/widgets/{name}", endpoint, methods=["PATCH"]),
        Route("/api/app/organizations/{organization_id:int}/service-accounts", endpoint, methods=["GET"]),
        Mount("/extra", routes=[Route("/thing", endpoint, methods=["DELETE"])]),
        Route("/healthz", endpoint, methods=["GET"]),
    ]


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in refs(value)]
    if isinstance(node, list):
        return [r for item in node for r in refs(item)]
    return []


def test_every_route_and_method_is_documented_once() -> None:
    document = build_document(routes(), INTERFACES)
    listed = {(path, method) for path, item in document["paths"].items() for method in item}
    assert listed == {
        ("/import", "get"),
        ("/import", "post"),
        ("/track", "get"),
        ("/track", "post"),
        ("/track", "options"),
        ("/api/2.0/segmentation", "get"),
        ("/api/2.0/segmentation", "post"),
        ("/api/query/segmentation", "get"),
        ("/api/query/segmentation", "post"),
        ("/api/2.0/export", "get"),
        ("/api/app/projects/{project_id}/widgets/{name}", "patch"),
        ("/api/app/organizations/{organization_id}/service-accounts", "get"),
        ("/extra/thing", "delete"),
        ("/healthz", "get"),
    }
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    assert all("default" in op["responses"] for item in document["paths"].values() for op in item.values())


def test_published_operations_are_used_under_every_prefix() -> None:
    paths = build_document(routes(), INTERFACES)["paths"]
    assert paths["/import"]["post"]["x-published-operation-id"] == "import-events"
    assert paths["/api/2.0/segmentation"]["get"]["x-published-operation-id"] == "segmentation-query"
    assert paths["/api/query/segmentation"]["get"]["x-published-operation-id"] == "segmentation-query"
    assert paths["/api/2.0/export"]["get"]["x-published-operation-id"] == "raw-event-export"
    # Footfall's own: POST for a report, GET /import (405), a management route, a service route
    for path, method in [("/api/2.0/segmentation", "post"), ("/import", "get"), ("/healthz", "get")]:
        assert "x-published-operation-id" not in paths[path][method]
    assert paths["/extra/thing"]["delete"]["description"] == "Does a thing.\n\nAt length."
    # the query interface's error shape
    error = paths["/api/2.0/export"]["get"]["responses"]["default"]["content"]["application/json"]["schema"]
    assert error["required"] == ["error"]


def test_path_parameters_follow_the_route() -> None:
    paths = build_document(routes(), INTERFACES)["paths"]
    generated = paths["/api/app/projects/{project_id}/widgets/{name}"]["patch"]
    assert generated["parameters"] == [
        {"in": "path", "name": "project_id", "required": True, "schema": {"type": "integer", "minimum": 0}},
        {"in": "path", "name": "name", "required": True, "schema": {"type": "string"}},
    ]
    assert "requestBody" in generated
    published = paths["/api/app/organizations/{organization_id}/service-accounts"]["get"]
    assert "x-published-operation-id" in published
    in_path = [p for p in published["parameters"] if p.get("in") == "path"]
    assert [p["name"] for p in in_path] == ["organization_id"]  # the published `{organizationId}` renamed


def test_every_reference_resolves() -> None:
    document = build_document(routes(), INTERFACES)
    found = refs(document["paths"]) + refs(document["components"])
    assert found
    for ref in found:
        _, _, kind, name = ref.split("/", 3)
        assert name in document["components"][kind], ref
