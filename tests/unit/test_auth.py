"""Authentication and authorisation of import and query requests (`shared.auth`).

Spec "Authentication" §3 and semantics §0.2: service account (Basic `username:secret`
plus `project_id`), project secret as Basic username with an empty password, project
token likewise (import only; without `project_id` the token names the project). Missing
or wrong credentials → 401; a service account that is not Owner/Admin of the project,
or not a member, → 403.
"""

from __future__ import annotations

import base64
import time

import orjson
import pytest

from footfall.shared.auth import Authenticator, AuthError, Principal, parse_basic
from footfall.shared.credentials import VerifiedCache, hash_secret, lookup_key, verify_secret
from footfall.shared.metadata import Directory


def basic(user: str, password: str = "") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def auth(directory: Directory) -> Authenticator:
    return Authenticator(directory)


# -- parse_basic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (basic("user", "pass"), ("user", "pass")),
        (basic("tok", ""), ("tok", "")),
        (basic("user", "pa:ss"), ("user", "pa:ss")),
        ("Basic user:pass", ("user", "pass")),
        ("Basic tok:", ("tok", "")),
        ("basic " + base64.b64encode(b"u:p").decode(), ("u", "p")),
        ("BASIC   " + base64.b64encode(b"u:p").decode() + "  ", ("u", "p")),
        ("Basic " + base64.b64encode(b"lonetoken").decode(), ("lonetoken", "")),
        ("Basic 0123456789abcdef0123456789abcdef", ("0123456789abcdef0123456789abcdef", "")),
        ("Basic " + base64.b64encode(b":").decode(), ("", "")),
        ("Basic " + base64.b64encode("ünï:cødé".encode()).decode(), ("ünï", "cødé")),
    ],
    ids=[
        "base64", "base64-empty-password", "password-with-colon", "plain-text", "plain-text-empty-password",
        "lowercase-scheme", "extra-whitespace", "base64-no-colon", "plain-no-colon", "only-colon", "utf8",
    ],
)  # fmt: skip
def test_parse_basic_forms(header: str, expected: tuple[str, str]) -> None:
    assert parse_basic(header) == expected


@pytest.mark.parametrize(
    "header",
    [None, "", "Basic", "Basic ", "Basic    ", "Bearer abc", "Digest user=x", "abc"],
    ids=["none", "empty", "scheme-only", "scheme-space", "scheme-blanks", "bearer", "digest", "no-scheme"],
)
def test_parse_basic_absent(header: str | None) -> None:
    assert parse_basic(header) is None


# -- the three ways to import ------------------------------------------------------------


@pytest.mark.parametrize("username", ["owner-sa", "admin-sa"], ids=["owner", "admin"])
def test_import_service_account_with_project_id(auth: Authenticator, creds, username: str) -> None:
    p = auth.for_import(basic(username, creds.sa_secret), "1")
    assert isinstance(p, Principal)
    assert (p.project_id, p.via, p.username) == (1, "service_account", username)


def test_import_service_account_member_of_other_project(auth: Authenticator, creds) -> None:
    p = auth.for_import(basic("outsider-sa", creds.sa_secret), "2")
    assert (p.project_id, p.via) == (2, "service_account")


def test_import_project_secret_as_username(auth: Authenticator, creds) -> None:
    p = auth.for_import(basic(creds.secret), None)
    assert (p.project_id, p.via) == (1, "secret")
    assert auth.for_import(basic(creds.secret2), None).project_id == 2
    assert auth.for_import(basic(creds.secret), "1").project_id == 1


@pytest.mark.parametrize("project_id", [None, "", "1"], ids=["absent", "empty", "matching"])
def test_import_token_as_username(auth: Authenticator, creds, project_id: str | None) -> None:
    p = auth.for_import(basic(creds.token), project_id)
    assert (p.project_id, p.via) == (1, "token")


def test_import_token_names_its_own_project(auth: Authenticator, creds) -> None:
    assert auth.for_import(basic(creds.token2), None).project_id == 2


def test_import_token_plain_text_without_colon(auth: Authenticator, creds) -> None:
    assert auth.for_import(f"Basic {creds.token}", None).project_id == 1


@pytest.mark.parametrize(
    ("which", "project_id"),
    [("token", "2"), ("token2", "1"), ("secret", "2"), ("token", "99")],
    ids=["token1-project2", "token2-project1", "secret1-project2", "token-unknown-project"],
)
def test_import_credential_for_other_project_forbidden(auth: Authenticator, creds, which: str, project_id: str) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(basic(getattr(creds, which)), project_id)
    assert err.value.status == 403


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer 0123456789abcdef0123456789abcdef",
        basic("not-a-token"),
        basic(""),
        basic("owner-sa", "wrong-secret"),
        basic("nobody", "service-account-secret"),
        basic("0123456789abcdef0123456789abcdeF"),
        basic(" 0123456789abcdef0123456789abcdef"),
    ],
    ids=[
        "missing", "empty", "bearer", "unknown-token", "empty-username", "sa-wrong-secret", "sa-unknown-user",
        "token-case-changed", "token-with-space",
    ],
)  # fmt: skip
def test_import_missing_or_wrong_credentials_401(auth: Authenticator, header: str | None) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(header, "1")
    assert err.value.status == 401


def test_import_token_with_password_is_not_a_token(auth: Authenticator, creds) -> None:
    # A non-empty password means "service account"; a token in the username does not help.
    with pytest.raises(AuthError) as err:
        auth.for_import(basic(creds.token, "x"), None)
    assert err.value.status == 401


@pytest.mark.parametrize("username", ["analyst-sa", "consumer-sa"], ids=["analyst", "consumer"])
def test_import_service_account_without_import_role_403(auth: Authenticator, creds, username: str) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(basic(username, creds.sa_secret), "1")
    assert err.value.status == 403
    assert "owner or admin" in err.value.message.lower()


@pytest.mark.parametrize("project_id", ["1", "99"], ids=["other-project", "unknown-project"])
def test_import_service_account_not_a_member_403(auth: Authenticator, creds, project_id: str) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(basic("outsider-sa", creds.sa_secret), project_id)
    assert err.value.status == 403


def test_import_service_account_without_project_id_400(auth: Authenticator, creds) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(basic("owner-sa", creds.sa_secret), None)
    assert err.value.status == 400
    assert "project_id" in err.value.message


@pytest.mark.parametrize(
    "project_id",
    ["abc", "0", "-1", "1.0", " 1x", " 1", "+1", "1_0", "\u0661", "0x1"],
    ids=["word", "zero", "negative", "float", "junk", "space", "plus", "underscore", "arabic-digit", "hex"],
)
def test_import_project_id_not_a_positive_integer_400(auth: Authenticator, creds, project_id: str) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_import(basic(creds.token), project_id)
    assert err.value.status == 400


def test_import_wrong_secret_after_a_cached_success_still_401(directory: Directory, creds) -> None:
    auth = Authenticator(directory)
    auth.for_import(basic("owner-sa", creds.sa_secret), "1")
    with pytest.raises(AuthError) as err:
        auth.for_import(basic("owner-sa", creds.sa_secret + "x"), "1")
    assert err.value.status == 401


def test_import_credentials_of_removed_project_403(directory: Directory, creds) -> None:
    without_1 = Directory(
        projects={2: directory.projects[2]},
        tokens=directory.tokens,
        secrets=directory.secrets,
        accounts=directory.accounts,
    )
    auth = Authenticator(without_1)
    with pytest.raises(AuthError) as err:
        auth.for_import(basic(creds.token), None)
    assert err.value.status == 403
    assert auth.for_import(basic(creds.token2), None).project_id == 2


# -- query interface: no tokens ------------------------------------------------------------


def test_query_refuses_project_token(auth: Authenticator, creds) -> None:
    with pytest.raises(AuthError) as err:
        auth.for_query(basic(creds.token), None)
    assert err.value.status == 401
    with pytest.raises(AuthError):
        auth.for_query(basic(creds.token), "1")


def test_query_accepts_secret_and_any_member_service_account(auth: Authenticator, creds) -> None:
    assert auth.for_query(basic(creds.secret), None).project_id == 1
    for username in ("owner-sa", "analyst-sa", "consumer-sa"):
        assert auth.for_query(basic(username, creds.sa_secret), "1").role is not None
    with pytest.raises(AuthError) as err:
        auth.for_query(basic("outsider-sa", creds.sa_secret), "1")
    assert err.value.status == 403


# -- secrets at rest -----------------------------------------------------------------------


def test_directory_holds_no_clear_credentials(directory: Directory, creds) -> None:
    dumped = orjson.dumps(directory.to_dict()).decode() + repr(directory)
    for clear in (creds.token, creds.token2, creds.secret, creds.secret2, creds.sa_secret):
        assert clear not in dumped
    assert lookup_key(creds.token) in directory.tokens
    for account in directory.accounts.values():
        assert account.secret_hash.startswith("scrypt$")


def test_directory_round_trip_authenticates_the_same(directory: Directory, creds) -> None:
    again = Directory.from_dict(orjson.loads(orjson.dumps(directory.to_dict())))
    assert again == directory
    auth = Authenticator(again)
    assert auth.for_import(basic(creds.token), None).project_id == 1
    assert auth.for_import(basic("admin-sa", creds.sa_secret), "1").role == "admin"


def test_secret_hashes_are_salted_and_verify() -> None:
    a, b = hash_secret("s3cret"), hash_secret("s3cret")
    assert a != b and "s3cret" not in a
    assert verify_secret("s3cret", a) and verify_secret("s3cret", b)
    assert not verify_secret("s3cret!", a)
    assert not verify_secret("s3cret", "plain$text")
    assert not verify_secret("s3cret", "s3cret")


def test_lookup_key_is_keyed_not_plain_sha256() -> None:
    import hashlib

    assert lookup_key("tok") != hashlib.sha256(b"tok").hexdigest()
    assert lookup_key("tok") == lookup_key("tok") != lookup_key("tok ")


def test_verified_cache_expires() -> None:
    stored = hash_secret("pw")
    cache = VerifiedCache(ttl=0.05)
    assert cache.verify("pw", stored)
    assert not cache.verify("wrong", stored)
    time.sleep(0.06)
    assert cache.verify("pw", stored)  # re-verified with scrypt after expiry


# -- over HTTP: status codes and JSON bodies -------------------------------------------------

EVENT = {"event": "e", "properties": {"distinct_id": "u", "$insert_id": "auth-1"}}


def _event() -> list[dict[str, object]]:
    props = dict(EVENT["properties"])  # type: ignore[arg-type]
    props["time"] = int(time.time()) - 60
    return [{"event": "e", "properties": props}]


@pytest.mark.parametrize(
    ("header", "query", "status", "project"),
    [
        ("sa:owner", "?strict=1&project_id=1", 200, 1),
        ("secret", "?strict=1", 200, 1),
        ("token", "?strict=1", 200, 1),
        ("token", "?strict=1&project_id=1", 200, 1),
        ("token2", "?strict=1", 200, 2),
        ("token", "?strict=1&project_id=2", 403, None),
        ("sa:analyst", "?strict=1&project_id=1", 403, None),
        ("sa:consumer", "?strict=1&project_id=1", 403, None),
        ("sa:outsider", "?strict=1&project_id=1", 403, None),
        ("none", "?strict=1", 401, None),
        ("wrong", "?strict=1", 401, None),
        ("sa:wrong-secret", "?strict=1&project_id=1", 401, None),
    ],
    ids=[
        "service-account", "secret", "token", "token-matching-project", "token-names-project-2",
        "token-mismatching-project", "analyst", "consumer", "not-member", "missing", "wrong-token",
        "wrong-sa-secret",
    ],
)  # fmt: skip
def test_http_import_auth(gateway, creds, header: str, query: str, status: int, project: int | None) -> None:
    headers = {}
    if header == "token":
        headers["authorization"] = basic(creds.token)
    elif header == "token2":
        headers["authorization"] = basic(creds.token2)
    elif header == "secret":
        headers["authorization"] = basic(creds.secret)
    elif header == "wrong":
        headers["authorization"] = basic("nope")
    elif header == "sa:wrong-secret":
        headers["authorization"] = basic("owner-sa", "nope")
    elif header.startswith("sa:"):
        headers["authorization"] = basic(f"{header[3:]}-sa", creds.sa_secret)
    r = gateway.post("/import" + query, json=_event(), headers=headers)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["code"] == status
    if status == 200:
        assert body == {"code": 200, "num_records_imported": 1, "status": "OK"}
        assert [e.project_id for e in gateway.sink.events] == [project]
    else:
        assert body["status"] == {401: "Unauthorized", 403: "Forbidden"}[status]
        assert isinstance(body["error"], str) and body["error"]
        assert gateway.sink.events == []


def test_http_401_body_matches_interface(gateway) -> None:
    r = gateway.post("/import?strict=1", json=_event(), headers={"authorization": basic("nope")})
    assert r.status_code == 401
    assert r.json() == {"code": 401, "error": "Invalid credentials", "status": "Unauthorized"}


def test_http_non_ascii_authorization_bytes_401(gateway) -> None:
    r = gateway.post("/import", json=_event(), headers={"authorization": b"Basic \xff\xfe:\x80"})
    assert r.status_code == 401
    assert r.json()["code"] == 401


def test_http_secrets_not_echoed_in_errors(gateway, creds) -> None:
    r = gateway.post("/import?project_id=2", json=_event(), headers={"authorization": basic(creds.token)})
    assert r.status_code == 403
    assert creds.token not in r.text
