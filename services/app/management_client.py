"""`footfall --url URL --user NAME:SECRET projects|service-accounts …`: the management CLI over HTTP.

Calls the `/api/app` routes of a running `footfall serve` or `footfall query`
(`footfall.services.app.organizations`), so nothing has to be stopped. The organization is
the caller's (`GET /api/app/me`). `--json` prints the API's JSON; otherwise a table (or the
one created item as `key: value` lines). A refused request prints the server's message and
exits 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson
from rich.console import Console
from rich.progress import Progress

__all__ = ["ManagementClient", "run_http"]

TIMEOUT_SECONDS = 30.0


class _Failed(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ManagementClient:
    def __init__(self, url: str, user: str) -> None:
        import httpx

        if ":" not in user:
            raise _Failed("--user must be USERNAME:SECRET (a service account)", 2)
        username, secret = user.split(":", 1)
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, auth=(username, secret), timeout=TIMEOUT_SECONDS)
        self._org: int | None = None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise _Failed(f"cannot reach {self.url}: {exc}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            text = message if isinstance(message, str) else response.text.strip()[:300] or response.reason_phrase
            raise _Failed(f"{text} (HTTP {response.status_code})")
        if answer is None:
            raise _Failed(f"{self.url} did not answer with JSON (HTTP {response.status_code})")
        return answer

    def organization(self) -> int:
        if self._org is None:
            self._org = int(self.call("GET", "/api/app/me")["results"]["organization_id"])
        return self._org

    def close(self) -> None:
        self._client.close()


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _item(item: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {'' if v is None else v}" for k, v in item.items())


PROJECT_COLUMNS = ["id", "name", "timezone", "region", "role"]
ACCOUNT_COLUMNS = ["id", "username", "created", "expires", "last_used", "creator"]


def _projects(client: ManagementClient, args: argparse.Namespace) -> tuple[Any, str]:
    if args.action == "list":
        answer = client.call("GET", f"/api/app/organizations/{client.organization()}/projects")
        return answer, _table(answer["results"], PROJECT_COLUMNS)
    if args.action == "create":
        body = {"name": args.name, "timezone": args.timezone}
        answer = client.call("POST", f"/api/app/organizations/{client.organization()}/projects", body)
        return answer, _item(answer["results"]) + "\n(the token and secret are shown only now)"
    if args.project is None:
        raise _Failed(f"projects {args.action} needs the project id", 2)
    path = f"/api/app/projects/{args.project}"
    if args.action == "show":
        answer = client.call("GET", path)
    elif args.action == "rename":
        body = {"name": args.name} if args.name else {}
        if args.timezone_change:
            body["timezone"] = args.timezone_change
        answer = client.call("PATCH", path, body)
    elif args.action == "retention":
        if args.days is None:
            answer = client.call("GET", f"{path}/retention")
        else:
            answer = _wait_applied(
                client, f"{path}/retention", client.call("PUT", f"{path}/retention", {"days": args.days})
            )
        days = answer["results"]["days"]
        kept = f"{days} days of events" if days else "every event (no retention period)"
        return answer, f"project {args.project} keeps {kept}"
    else:  # rotate-secret, rotate-token
        answer = client.call("POST", f"{path}/{args.action}")
        return answer, _item(answer["results"]) + "\n(shown only now; the old value stops working within seconds)"
    return answer, _item(answer["results"])


def _wait_applied(client: ManagementClient, path: str, answer: Any, timeout: float = 3600.0) -> Any:
    """Follow a retention change until the warehouse has applied it to the stored data (a
    progress bar on stderr over the parts still to rewrite); Ctrl-C stops watching, not the work."""
    todo = answer["results"]["applying"]["parts_to_do"]
    if not answer["results"]["applying"]["mutations"]:
        return answer
    deadline = time.monotonic() + timeout
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("applying to stored data (parts)", total=max(todo, 1))
        try:
            while answer["results"]["applying"]["mutations"] and time.monotonic() < deadline:
                time.sleep(0.5)
                answer = client.call("GET", path)
                left = answer["results"]["applying"]["parts_to_do"]
                progress.update(task, total=max(todo, left, 1), completed=max(todo - left, 0))
        except KeyboardInterrupt:
            print("footfall: still applying in the background", file=sys.stderr)
    return answer


def _accounts(client: ManagementClient, args: argparse.Namespace) -> tuple[Any, str]:
    org = client.organization()
    base = f"/api/app/organizations/{org}/service-accounts"
    if args.action == "list":
        if args.project is not None:
            answer = client.call("GET", f"/api/app/projects/{args.project}/service-accounts")
            return answer, _table(answer["results"], [*ACCOUNT_COLUMNS[:2], "role", *ACCOUNT_COLUMNS[2:]])
        answer = client.call("GET", base)
        return answer, _table(answer["results"], ACCOUNT_COLUMNS)
    if args.action == "create":
        if not args.username:
            raise _Failed("service-accounts create over HTTP needs --username", 2)
        body: dict[str, Any] = {"username": args.username, "role": args.role or "consumer"}
        if args.expires:
            body["expires"] = args.expires
        if args.project is not None:
            body["projects"] = [{"id": args.project, "role": args.role or "consumer"}]
        answer = client.call("POST", base, body)
        return answer, _item(answer["results"]) + "\n(the secret, `token`, is shown only now)"
    if args.id is None:
        raise _Failed(f"service-accounts {args.action} needs the service account id", 2)
    if args.action == "delete":
        return client.call("DELETE", f"{base}/{args.id}"), f"deleted service account {args.id}"
    if args.project is None:
        raise _Failed(f"service-accounts {args.action} needs --project", 2)
    if args.action == "add-to-project":
        body = {"projects": [{"id": args.project, "role": args.role or "consumer"}], "service_account_ids": [args.id]}
        answer = client.call("POST", f"{base}/add-to-project", body)
        return answer, f"service account {args.id} is {args.role or 'consumer'} in project {args.project}"
    body = {"projects": [{"id": args.project, "service_account_ids": [args.id]}]}
    answer = client.call("POST", f"{base}/remove-from-project", body)
    return answer, f"service account {args.id} removed from project {args.project}"


def run_http(args: argparse.Namespace, url: str, user: str, *, as_json: bool) -> int:
    """Run `projects …` or `service-accounts …` against the server at `url`."""
    client: ManagementClient | None = None
    try:
        client = ManagementClient(url, user)
        answer, text = (_projects if args.command == "projects" else _accounts)(client, args)
    except _Failed as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return exc.code
    finally:
        if client is not None:
            client.close()
    print(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() if as_json else text)
    return 0
