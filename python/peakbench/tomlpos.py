"""Where each key of a TOML document was written: key path -> line number.

tomllib gives values without positions; plans must report `file:line: field:
message`. This scanner walks the (already syntax-checked) text once and
records the line of every key, array element and array-of-tables entry,
with paths as tomllib's structure has them: ("test", 2, "hooks", "setup", 0).
"""

from __future__ import annotations

Path_ = tuple


class _Scanner:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.line = 1
        self.lines: dict[tuple, int] = {}
        self.array_counts: dict[tuple, int] = {}

    # -- low level ---------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def advance(self, k: int = 1) -> None:
        for _ in range(k):
            if self.i < len(self.text):
                if self.text[self.i] == "\n":
                    self.line += 1
                self.i += 1

    def skip_blank(self, newlines: bool) -> None:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                while self.i < len(self.text) and self.text[self.i] != "\n":
                    self.i += 1
            else:
                return

    def string(self) -> str:
        quote = self.peek()
        if self.text.startswith(quote * 3, self.i):
            self.advance(3)
            end = self.text.find(quote * 3, self.i)
            end = len(self.text) if end < 0 else end
            # a closing delimiter may be followed by up to two more quotes that belong to the string
            while self.text.startswith(quote, end + 3):
                end += 1
            value = self.text[self.i : end]
            self.advance(end + 3 - self.i)
            return value
        self.advance()
        out = []
        while self.i < len(self.text) and self.peek() != quote and self.peek() != "\n":
            if quote == '"' and self.peek() == "\\":
                out.append(self.text[self.i : self.i + 2])
                self.advance(2)
                continue
            out.append(self.peek())
            self.advance()
        self.advance()
        return "".join(out)

    def key(self) -> tuple:
        parts = []
        while True:
            self.skip_blank(newlines=False)
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                start = self.i
                while self.i < len(self.text) and (self.peek().isalnum() or self.peek() in "_-"):
                    self.i += 1
                parts.append(self.text[start : self.i])
            self.skip_blank(newlines=False)
            if self.peek() == ".":
                self.advance()
                continue
            return tuple(parts)

    # -- structure ---------------------------------------------------------------
    def resolve(self, keys: tuple) -> tuple:
        """A header's keys with the current index of every array of tables inserted."""
        resolved: list = []
        for key in keys:
            resolved.append(key)
            count = self.array_counts.get(tuple(resolved))
            if count is not None:
                resolved.append(count - 1)
        return tuple(resolved)

    def value(self, path: tuple) -> None:
        c = self.peek()
        if c in ('"', "'"):
            self.string()
        elif c == "[":
            self.advance()
            index = 0
            while True:
                self.skip_blank(newlines=True)
                if self.peek() in ("]", ""):
                    self.advance()
                    return
                self.lines.setdefault(path + (index,), self.line)
                self.value(path + (index,))
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.advance()
                    index += 1
        elif c == "{":
            self.advance()
            while True:
                self.skip_blank(newlines=True)
                if self.peek() in ("}", ""):
                    self.advance()
                    return
                line = self.line
                keys = self.key()
                self.lines.setdefault(path + keys, line)
                if self.peek() == "=":
                    self.advance()
                self.skip_blank(newlines=False)
                self.value(path + keys)
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.advance()
        else:
            while self.i < len(self.text) and self.peek() not in ",]}\n#":
                self.i += 1

    def scan(self) -> dict[tuple, int]:
        table: tuple = ()
        while True:
            self.skip_blank(newlines=True)
            if self.i >= len(self.text):
                return self.lines
            line = self.line
            if self.peek() == "[":
                double = self.peek(1) == "["
                self.advance(2 if double else 1)
                keys = self.key()
                self.advance(2 if double else 1)
                if double:
                    parent = self.resolve(keys[:-1])
                    array = parent + (keys[-1],)
                    count = self.array_counts.get(array, 0)
                    self.array_counts[array] = count + 1
                    table = array + (count,)
                    self.lines.setdefault(array, line)
                else:
                    table = self.resolve(keys)
                self.lines.setdefault(table, line)
                continue
            keys = self.key()
            self.lines.setdefault(table + keys, line)
            if self.peek() == "=":
                self.advance()
            self.skip_blank(newlines=False)
            self.value(table + keys)


def key_lines(text: str) -> dict[tuple, int]:
    try:
        return _Scanner(text).scan()
    except (IndexError, RecursionError):  # never fail an error report over a position
        return {}


class Positions:
    """line_of(path): the line of the path, or of its nearest written ancestor."""

    def __init__(self, text: str):
        self.lines = key_lines(text)

    def line_of(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None
