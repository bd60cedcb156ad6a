"""The one way the checker says no."""


class Refused(Exception):
    """The certificate is not a proof: the message names the first step that fails, or what is malformed."""


def require(condition, message: str) -> None:
    if not condition:
        raise Refused(message)
