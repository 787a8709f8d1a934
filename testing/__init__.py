"""Footfall for other projects' integration tests: an embedded server on a free port with known
credentials in a temporary folder (`run_footfall`, and the pytest fixture `footfall` of the
plugin `footfall.testing.plugin`, registered as a `pytest11` entry point), and a testcontainers
class for the Docker image with the same shape (`footfall.testing.container.FootfallContainer`,
imported on demand: it needs `testcontainers`).

    def test_signup_is_tracked(footfall):
        Mixpanel(footfall.token, consumer=Consumer(events_url=footfall.url + "/track")).track("u1", "Signed up")
        export = httpx.get(footfall.url + "/api/2.0/export", params={"project_id": 1, "from_date": "2020-01-01",
                           "to_date": "2099-12-31"}, auth=footfall.auth)
        assert '"Signed up"' in export.text
"""

from __future__ import annotations

from footfall.testing.server import Credentials, FootfallInstance, FootfallStartError, run_footfall

__all__ = ["Credentials", "FootfallInstance", "FootfallStartError", "run_footfall"]
