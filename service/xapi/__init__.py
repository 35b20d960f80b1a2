"""xAPI: the events as xAPI 1.0.3 statements (statements.py), the queries that select them
(queries.py), and their forwarding to a platform's own LRS (forward.py). The API's statement
view is api/xapi.py."""
