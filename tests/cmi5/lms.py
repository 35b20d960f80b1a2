"""An LMS's side of cmi5 running for real on loopback (the AICC cmi5 specification, sections 8 to 11):
the launch URL with its five parameters, the fetch URL (one token per launch: a second POST answers
error-code 1), and the LMS's record store with the State, Agent Profile and Statements resources as
xAPI 1.0.3 defines them (a statement id already held: 204 when the statement is the same, 409 when
it differs). It records every request in the order it came, and can refuse statements for a while."""

from __future__ import annotations

import json
import random
import secrets
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

SESSION_ID = "https://w3id.org/xapi/cmi5/context/extensions/sessionid"
PUBLISHER = "https://attention-workbench.example/xapi/cmi5/course"


class Cmi5Lms:
    def __init__(self):
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request but preflights, in order
        self.statements: dict[str, dict] = {}  # id -> the statement stored
        self.order: list[str] = []  # ids in the order they were stored
        self.conflicts = 0  # statements refused with 409 (an id held with other content)
        self.refuse = 0  # answer this many statement writes with 503
        self.fetches: dict[str, int] = {}  # fetch id -> POSTs
        self.tokens: dict[str, str] = {}  # fetch id -> its token
        self.launches: dict[str, dict] = {}  # registration -> its LaunchData
        self.preferences: dict | None = {"languagePreference": "en-US,es", "audioPreference": "on"}
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()

    def launch(
        self,
        site: str,
        lesson: str,
        *,
        mode: str = "Normal",
        mastery: float | None = 0.8,
        learner: str = "learner-1",
        registration: str | None = None,
        seed: int = 0,
        return_url: bool = True,
    ) -> dict:
        """A launch of `lesson` on `site`: its URL (the five parameters in an order `seed` shuffles),
        the actor, the registration, the session id and the activity id."""
        registration = registration or str(uuid.uuid4())
        fetch_id, session = secrets.token_hex(8), str(uuid.uuid4())
        self.tokens[fetch_id] = secrets.token_urlsafe(16)
        actor = {"objectType": "Agent", "account": {"homePage": self.url, "name": learner}}
        activity = f"https://attention-workbench.example/xapi/lessons/{lesson}"
        data = {
            "contextTemplate": {
                "contextActivities": {"grouping": [{"objectType": "Activity", "id": PUBLISHER}]},
                "extensions": {SESSION_ID: session},
            },
            "launchMode": mode,
            "moveOn": "CompletedAndPassed",
        }
        if mastery is not None:
            data["masteryScore"] = mastery
        if return_url:
            data["returnURL"] = f"{self.url}/course?returned={registration}"
        self.launches[registration] = {"data": data, "activity": activity, "actor": actor}
        parameters = [
            ("endpoint", f"{self.url}/xapi/"),
            ("fetch", f"{self.url}/fetch/{fetch_id}"),
            ("actor", json.dumps(actor)),
            ("registration", registration),
            ("activityId", activity),
        ]
        random.Random(seed).shuffle(parameters)
        url = f"{site}/lessons/{lesson}?{urlencode(parameters)}"
        return {"url": url, "actor": actor, "registration": registration, "session": session, "activity": activity}

    def sent(self, registration: str) -> list[dict]:
        """The statements of one registration, in the order the store took them."""
        ours = [self.statements[i] for i in self.order]
        return [s for s in ours if s.get("context", {}).get("registration") == registration]

    def verbs(self, registration: str) -> list[str]:
        return [s["verb"]["id"].rsplit("/", 1)[1] for s in self.sent(registration)]

    def _handler(self):
        lms = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: object = None, kind: str = "application/json") -> None:
                data = b"" if body is None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_OPTIONS(self):
                self.send_response(204)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Methods", "GET, PUT, POST")
                self.send_header(
                    "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Experience-API-Version"
                )
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _authorized(self) -> bool:
                said = self.headers.get("Authorization", "")
                version = self.headers.get("X-Experience-API-Version", "")
                return said.removeprefix("Basic ") in lms.tokens.values() and version.startswith("1.0")

            def do_POST(self):
                path = urlsplit(self.path).path
                lms.requests.append(("POST", path))
                if path.startswith("/fetch/"):
                    fetch_id = path.removeprefix("/fetch/")
                    with lms.lock:
                        lms.fetches[fetch_id] = lms.fetches.get(fetch_id, 0) + 1
                        first = lms.fetches[fetch_id] == 1
                    if fetch_id in lms.tokens and first:
                        return self._answer(200, {"auth-token": lms.tokens[fetch_id]})
                    return self._answer(200, {"error-code": "1", "error-text": "Already in use"})
                self._answer(404, {"error": "no such resource"})

            def do_GET(self):
                parts = urlsplit(self.path)
                lms.requests.append(("GET", parts.path))
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/course":
                    return self._answer(
                        200, "<!doctype html><title>Course</title><h1>Back in the course</h1>", "text/html"
                    )
                if not self._authorized():
                    return self._answer(401, {"error": "no token"})
                if parts.path == "/xapi/activities/state" and query.get("stateId") == "LMS.LaunchData":
                    found = lms.launches.get(query.get("registration", ""))
                    same = found and found["activity"] == query.get("activityId")
                    if same and json.loads(query.get("agent", "null")) == found["actor"]:
                        return self._answer(200, found["data"])
                    return self._answer(404, {"error": "no such state"})
                if parts.path == "/xapi/agents/profile" and query.get("profileId") == "cmi5LearnerPreferences":
                    return self._answer(200, lms.preferences) if lms.preferences else self._answer(404, {})
                self._answer(404, {"error": "no such resource"})

            def do_PUT(self):
                parts = urlsplit(self.path)
                lms.requests.append(("PUT", parts.path))
                if parts.path != "/xapi/statements":
                    return self._answer(404, {"error": "no such resource"})
                if not self._authorized():
                    return self._answer(401, {"error": "no token"})
                statement = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                given = parse_qs(parts.query).get("statementId", [""])[0]
                with lms.lock:
                    if lms.refuse:
                        lms.refuse -= 1
                        return self._answer(503, {"error": "the store is busy"})
                    if given != statement.get("id"):
                        return self._answer(400, {"error": "statementId differs from the statement's id"})
                    held = lms.statements.get(given)
                    if held is not None:
                        lms.conflicts += held != statement
                        return self._answer(204 if held == statement else 409)
                    lms.statements[given] = statement
                    lms.order.append(given)
                self._answer(204)

        return Handler
