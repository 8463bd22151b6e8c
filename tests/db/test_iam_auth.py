"""IAM database authentication: the token boto3 signs, and the settings that go with it."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from moto import mock_aws

from dispatch_fn.db.database import IamLogin, conninfo_for, iam_login, rds_auth_token
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings

LOGIN = IamLogin(host="duly.cluster-abc.eu-west-1.rds.amazonaws.com", port=5432,
                 user="duly_dispatcher", region="eu-west-1")  # fmt: skip


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with mock_aws():
        yield


def test_the_token_is_a_presigned_rds_connect_for_that_user_valid_15_minutes(aws: None) -> None:
    token = rds_auth_token(LOGIN)
    parts = urlsplit(f"https://{token}")
    query = parse_qs(parts.query)
    assert (parts.hostname, parts.port) == (LOGIN.host, LOGIN.port)
    assert query["Action"] == ["connect"]
    assert query["DBUser"] == ["duly_dispatcher"]
    assert query["X-Amz-Expires"] == ["900"]
    assert query["X-Amz-Credential"][0].split("/")[2:4] == ["eu-west-1", "rds-db"]
    assert query["X-Amz-Signature"][0]


def test_each_call_signs_anew(aws: None) -> None:
    # A token is not cached: each new connection asks for its own.
    assert rds_auth_token(LOGIN).startswith(f"{LOGIN.host}:5432/?")


def test_iam_connection_parameters_come_from_db_host_name_user_with_verified_tls() -> None:
    settings = Settings.from_environ({
        "DB_AUTH": "iam", "DB_HOST": LOGIN.host, "DB_NAME": "duly", "DB_USER": "duly_dispatcher",
        "DB_SSLMODE": "verify-full", "AWS_REGION": "eu-west-1",
    })  # fmt: skip
    conninfo = conninfo_for(settings)
    assert "password" not in conninfo
    assert "sslmode=verify-full" in conninfo
    assert iam_login(settings, conninfo) == LOGIN


@pytest.mark.parametrize("sslmode", [None, "disable", "allow", "prefer"])
def test_iam_auth_refuses_a_mode_that_may_send_the_token_in_plain_text(
    sslmode: str | None,
) -> None:
    environ = {"DB_AUTH": "iam", **({"DB_SSLMODE": sslmode} if sslmode else {})}
    with pytest.raises(ConfigurationError, match="IAM tokens need one of require"):
        Settings.from_environ(environ)


def test_iam_auth_names_the_settings_it_lacks() -> None:
    settings = Settings.from_environ({"DB_AUTH": "iam", "DB_SSLMODE": "verify-full"})
    with pytest.raises(ConfigurationError, match="DB_HOST, DB_NAME, DB_USER"):
        conninfo_for(settings)


def test_an_unknown_auth_mode_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="DB_AUTH='kerberos'"):
        Settings.from_environ({"DB_AUTH": "kerberos"})
