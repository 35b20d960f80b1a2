"""The tool's signing keys as platforms see them: /lti/jwks verifies what the tool signs, and a
rotation keeps the old key published until it is retired."""

from __future__ import annotations

import json

import jwt
from click.testing import CliRunner

from service.cli import main
from service.db.lti_tables import LtiKey
from service.lti import keys


def verifies(jwks: dict, token: str) -> bool:
    kid = jwt.get_unverified_header(token)["kid"]
    match = [k for k in jwks["keys"] if k["kid"] == kid]
    if not match:
        return False
    public = jwt.PyJWK.from_json(json.dumps(match[0])).key
    return jwt.decode(token, public, algorithms=["RS256"])["hello"] == "platform"


def signed_now(db) -> str:
    with db.write() as session:
        key = keys.signing_key(session)
        return jwt.encode({"hello": "platform"}, key.private_pem, algorithm="RS256", headers={"kid": key.kid})


def test_the_key_set_verifies_what_the_tool_signs(client, db):
    jwks = client.get("/lti/jwks").get_json()
    assert [(k["kty"], k["alg"], k["use"]) for k in jwks["keys"]] == [("RSA", "RS256", "sig")]
    assert "d" not in jwks["keys"][0]  # public parts only
    assert verifies(jwks, signed_now(db))


def test_a_rotated_key_stays_published_until_retired(client, db, tmp_path, monkeypatch):
    old_token = signed_now(db)
    with db.write() as session:
        old = keys.signing_key(session).kid
        new = keys.rotate(session).kid
    jwks = client.get("/lti/jwks").get_json()
    assert [k["kid"] for k in jwks["keys"]] == [new, old]
    assert verifies(jwks, old_token) and verifies(jwks, signed_now(db))
    with db.write() as session:
        assert not keys.retire(session, new)  # the signing key cannot be retired
        assert keys.retire(session, old)
    jwks = client.get("/lti/jwks").get_json()
    assert [k["kid"] for k in jwks["keys"]] == [new] and not verifies(jwks, old_token)


def test_rotate_and_retire_from_the_command_line(app, db, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app.extensions["settings"].database_url)
    first = CliRunner().invoke(main, ["lti", "rotate-key"]).output.split()[-1]
    second = CliRunner().invoke(main, ["lti", "rotate-key"]).output.split()[-1]
    assert CliRunner().invoke(main, ["lti", "retire-key", first]).output.strip() == f"retired {first}"
    refused = CliRunner().invoke(main, ["lti", "retire-key", second])
    assert refused.exit_code != 0 and "has been rotated out" in refused.output
    with db.read() as session:
        published = {k.kid for k in session.query(LtiKey).filter(LtiKey.published.is_(True))}
    assert published == {second}


def test_the_configuration_names_every_url_a_platform_needs(app_config):
    from service.app import create_app

    client = create_app({**app_config, "public_url": "https://tool.example"}).test_client()
    config = client.get("/lti/config", base_url="https://attacker.example").get_json()  # never from Host
    assert config["oidc_initiation_url"] == "https://tool.example/lti/login"
    assert config["redirect_uris"] == ["https://tool.example/lti/launch"]
    assert config["public_jwk_url"] == "https://tool.example/lti/jwks"
    assert config["target_link_uri"] == "https://tool.example/lessons/multi-head-attention"
    assert client.get("/lti/jwks", base_url="https://tool.example").status_code == 200
