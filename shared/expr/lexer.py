"""Hand-written lexer: text -> tokens. Positions are 0-based character offsets."""

from __future__ import annotations

from footfall.shared.expr.errors import ExprSyntaxError
from footfall.shared.expr.tokens import KEYWORDS, Token, TokenKind

__all__ = ["tokenize"]

_PUNCT = {
    "(": TokenKind.LPAREN,
    ")": TokenKind.RPAREN,
    "[": TokenKind.LBRACKET,
    "]": TokenKind.RBRACKET,
    ",": TokenKind.COMMA,
}
_TWO_CHAR_OPS = ("==", "!=", ">=", "<=")
_ONE_CHAR_OPS = frozenset("<>+-*/%")
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WHITESPACE = frozenset(" \t\r\n")
_DIGITS = frozenset("0123456789")


def _is_name_start(ch: str) -> bool:
    return ch == "_" or ch == "$" or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_name_char(ch: str) -> bool:
    return _is_name_start(ch) or ch in _DIGITS


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch in _PUNCT:
            tokens.append(Token(_PUNCT[ch], ch, i, i + 1))
            i += 1
        elif text.startswith(_TWO_CHAR_OPS, i):
            tokens.append(Token(TokenKind.OP, text[i : i + 2], i, i + 2))
            i += 2
        elif ch in _ONE_CHAR_OPS:
            tokens.append(Token(TokenKind.OP, ch, i, i + 1))
            i += 1
        elif ch == "=":
            raise ExprSyntaxError(i, "'=='", "'='")
        elif ch == "!":
            raise ExprSyntaxError(i, "'!='", "'!'")
        elif ch == '"' or ch == "'":
            tok = _string(text, i)
            tokens.append(tok)
            i = tok.end
        elif ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
            tok = _number(text, i)
            tokens.append(tok)
            i = tok.end
        elif _is_name_start(ch):
            j = i + 1
            while j < n and _is_name_char(text[j]):
                j += 1
            word = text[i:j]
            kind = TokenKind.KEYWORD if word in KEYWORDS else TokenKind.NAME
            tokens.append(Token(kind, word, i, j))
            i = j
        else:
            raise ExprSyntaxError(i, "an expression", repr(ch))
    tokens.append(Token(TokenKind.END, "", n, n))
    return tokens


def _string(text: str, start: int) -> Token:
    quote = text[start]
    out: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == quote:
            return Token(TokenKind.STRING, "".join(out), start, i + 1)
        if ch == "\\":
            if i + 1 >= n:
                break
            esc = text[i + 1]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
                continue
            if esc == "u":
                code = text[i + 2 : i + 6]
                if len(code) != 4 or any(c not in "0123456789abcdefABCDEF" for c in code):
                    raise ExprSyntaxError(i, "four hex digits after '\\u'")
                point = int(code, 16)
                if 0xD800 <= point <= 0xDFFF:
                    raise ExprSyntaxError(i, "a unicode escape outside the surrogate range")
                out.append(chr(point))
                i += 6
                continue
            raise ExprSyntaxError(i, "a valid escape (\\\" \\' \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", repr("\\" + esc))
        out.append(ch)
        i += 1
    raise ExprSyntaxError(n, f"closing {quote} of the string that starts at position {start}")


def _number(text: str, start: int) -> Token:
    i, n = start, len(text)
    while i < n and text[i] in _DIGITS:
        i += 1
    if i < n and text[i] == ".":
        i += 1
        while i < n and text[i] in _DIGITS:
            i += 1
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j < n and text[j] in _DIGITS:
            while j < n and text[j] in _DIGITS:
                j += 1
            i = j
        else:
            raise ExprSyntaxError(j, "digits of the exponent")
    if i < n and _is_name_char(text[i]):
        raise ExprSyntaxError(i, "an operator or end of number", repr(text[i]))
    return Token(TokenKind.NUMBER, text[start:i], start, i)
