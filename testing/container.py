"""`FootfallContainer`: the Footfall Docker image under testcontainers, in the shape of the
`footfall` fixture (`instance()` gives the same `FootfallInstance`: URL and credentials).

    with FootfallContainer() as container:
        footfall = container.instance()

The image (`footfall:local` by default, as `docker compose build` tags it) runs `footfall
serve` with its data in the container; `start()` returns once `/healthz` answers.
"""

from __future__ import annotations

from typing import Any

from testcontainers.core.container import DockerContainer

from footfall.testing.server import Credentials, FootfallInstance, FootfallStartError, wait_healthy

__all__ = ["DEFAULT_IMAGE", "FootfallContainer", "serve_command"]

DEFAULT_IMAGE = "footfall:local"
PORT = 8000


def serve_command(port: int = PORT) -> list[str]:
    """The container's arguments (the image's entry point is `footfall`)."""
    return ["serve", "--host", "0.0.0.0", "--port", str(port), "--data", "/data"]  # noqa: S104 - inside the container


class FootfallContainer(DockerContainer):
    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        credentials: Credentials | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(image, **kwargs)
        self.credentials = credentials or Credentials()
        self.startup_timeout = startup_timeout
        self.with_exposed_ports(PORT)
        for key, value in {**self.credentials.env(), **(env or {})}.items():
            self.with_env(key, value)
        self.with_command(serve_command(PORT))

    def get_url(self) -> str:
        return f"http://{self.get_container_host_ip()}:{self.get_exposed_port(PORT)}"

    def start(self) -> FootfallContainer:
        super().start()
        if not wait_healthy(self.get_url(), self.startup_timeout):
            logs = b"".join(part or b"" for part in self.get_logs()).decode(errors="replace")
            self.stop()
            raise FootfallStartError(f"the Footfall container did not become healthy:\n{logs[-4000:]}")
        return self

    def instance(self) -> FootfallInstance:
        return FootfallInstance(self.get_url(), self.credentials, 1, None)
