"""CORS: only the configured platform origins may call the API from a browser."""

from service.app import create_app


def test_allowed_origin_gets_cors_headers_and_others_do_not(app_config):
    client = create_app({**app_config, "cors_origins": ["https://lms.example.org"]}).test_client()
    body = {"tokens": [[1, 2]], "heads": 1}
    allowed = client.post("/api/v1/attention", json=body, headers={"Origin": "https://lms.example.org"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://lms.example.org"
    other = client.post("/api/v1/attention", json=body, headers={"Origin": "https://evil.example.com"})
    assert "Access-Control-Allow-Origin" not in other.headers


def test_preflight_for_an_allowed_origin(app_config):
    client = create_app({**app_config, "cors_origins": ["https://lms.example.org"]}).test_client()
    response = client.options(
        "/api/v1/attention",
        headers={
            "Origin": "https://lms.example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type",
        },
    )
    assert response.status_code == 200
    assert "POST" in response.headers["Access-Control-Allow-Methods"]


def test_no_origins_configured_means_no_cross_origin_access(client):
    response = client.post(
        "/api/v1/attention", json={"tokens": [[1, 2]], "heads": 1}, headers={"Origin": "https://lms.example.org"}
    )
    assert "Access-Control-Allow-Origin" not in response.headers
