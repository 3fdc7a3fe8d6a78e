"""The tokenizer of Kafka Connect's ``Values.parseString`` (apache/kafka 4.4,
``connect/api/src/main/java/org/apache/kafka/connect/data/Values.java``, its nested ``Parser``):
what :mod:`fluxgate_sink.header_values` reads a header's text with."""

from __future__ import annotations

__all__ = ["Tokens", "blank", "trim"]

_BLANKS = "".join(map(chr, range(33)))  # what Java's String.trim() removes: U+0000 to the space
_DELIMITERS = frozenset(':,{}[]"')


def trim(token: str) -> str:
    """Java's ``String.trim()``."""
    return token.strip(_BLANKS)


def blank(token: str) -> bool:
    """Kafka's ``Utils.isBlank``: nothing left once trimmed."""
    return not token.strip(_BLANKS)


class Tokens:
    """Values' tokenizer: text split at ``: , { } [ ]`` and double quotes (each a token of its own)
    unless escaped by a backslash, which stays in the token; one token can be looked at ahead."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0  # where the next scan starts
        self.ahead: str | None = None  # a token scanned but not consumed

    def mark(self) -> int:
        return self.at - (len(self.ahead) if self.ahead is not None else 0)

    def rewind(self, to: int) -> None:
        self.at, self.ahead = to, None

    def has_next(self) -> bool:
        return self.ahead is not None or self.at < len(self.text)

    def next(self) -> str:
        token, self.ahead = (self.ahead, None) if self.ahead is not None else (self._scan(), None)
        return token

    def next_n(self, count: int) -> str | None:
        """The text of the next ``count`` tokens, consumed; None (nothing consumed) if there are fewer."""
        start = self.mark()
        for _ in range(count):
            if not self.has_next():
                self.rewind(start)
                return None
            self.next()
        return self.text[start : self.at]

    def consume(self, expected: str) -> bool:
        """Consume the next token if, trimmed, it is ``expected``; blank tokens before it are skipped
        either way (so a quoted string loses a blank token that precedes a delimiter, as in Java)."""
        if self.ahead is None:
            if not self.has_next():
                return False
            self.ahead = self._scan()
        while blank(self.ahead) and self.at < len(self.text):
            self.ahead = self._scan()
        if trim(self.ahead) != expected:
            return False
        self.ahead = None
        return True

    def _scan(self) -> str:
        text, start, escaped = self.text, self.at, False
        for at in range(start, len(text)):
            char = text[at]
            if char == "\\":
                escaped = not escaped
            elif char in _DELIMITERS and not escaped:
                self.at = at if at > start else at + 1
                return text[start:at] if at > start else char
            else:
                escaped = False
        self.at = len(text)
        return text[start:]
