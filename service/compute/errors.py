"""The one exception the engine raises for input it cannot compute honestly."""


class AttentionInputError(ValueError):
    """Invalid or non-finite input, or an overflow while computing.

    `field` names the input at fault (`tokens`, `heads`, `projections.query`, ...) so the API
    can point at it; the message names the numbers involved.
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # raised in the background process, raised again whole in the worker
        return type(self), (str(self), self.field)
