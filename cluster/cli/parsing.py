"""The ``cluster`` command's argparse parser class: a subcommand answers an argument it does not
take itself, with its own usage and the flag closest to a mistyped one ("did you mean --detach"),
rather than the top-level parser's usage, which lists every verb. (Python 3.11's argparse has no
``suggest_on_error``; 3.14's suggests only for choices.)"""

from __future__ import annotations

import argparse
import difflib


def _closest_flag(parser: argparse.ArgumentParser, text: str) -> str | None:
    """The flag of ``parser`` closest to ``text`` (``--flag`` or ``--flag=value``), if one is close."""
    name = text.split("=", 1)[0]
    flags = [flag for flag in parser._option_string_actions if flag.startswith("--") == name.startswith("--")]
    matches = difflib.get_close_matches(name, flags, n=1, cutoff=0.6)
    return matches[0] if matches else None


def unrecognized_message(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    words = []
    for extra in extras:
        closest = _closest_flag(parser, extra) if extra.startswith("-") else None
        words.append(f"{extra} (did you mean {closest}?)" if closest else extra)
    return "unrecognized arguments: " + " ".join(words)


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands without subcommands of their own (``up``, ``topic``,
    ``dlq list``) refuse what they do not take themselves. ``add_subparsers`` makes its parsers of
    the parent's class, so giving the root parser this class gives it to every subcommand."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        takes_subcommands = any(isinstance(action, argparse._SubParsersAction) for action in self._actions)
        if extras and not takes_subcommands:
            self.error(unrecognized_message(self, extras))
        return namespace, extras
