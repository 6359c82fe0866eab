"""Reading the console as a program would: HTTP requests to the live console and its pages'
tables parsed with the standard library's HTML parser (cells as text, rows keyed by a data-*
attribute when the template gives one)."""

from __future__ import annotations

import html.parser
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field


@dataclass
class Page:
    status: int
    text: str
    headers: dict = field(default_factory=dict)

    def table(self, table_id: str) -> list[dict]:
        """Rows of ``<table id=table_id>``'s body: {"cells": [...], "attrs": {...}}."""
        parser = _Tables()
        parser.feed(self.text)
        return parser.tables.get(table_id, [])

    def header(self, name: str) -> str:
        return {k.lower(): v for k, v in self.headers.items()}.get(name.lower(), "")

    def cells(self, table_id: str) -> list[list[str]]:
        return [row["cells"] for row in self.table(table_id)]

    def by_id(self, element_id: str) -> str:
        parser = _Texts(element_id)
        parser.feed(self.text)
        return parser.found


class _Tables(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[dict]] = {}
        self._table = None
        self._in_body = False
        self._row = None
        self._cell = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and self._table is None:
            self._table = attrs.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "table":
            self._depth += 1
        elif tag == "tbody" and self._table is not None and not self._depth:
            self._in_body = True
        elif tag == "tr" and self._in_body and not self._depth:
            self._row = {"cells": [], "attrs": attrs}
        elif tag in ("td", "th") and self._row is not None and not self._depth:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            if self._depth:
                self._depth -= 1
            else:
                self._table, self._in_body = None, False
        elif tag == "tbody" and not self._depth:
            self._in_body = False
        elif tag == "tr" and self._row is not None and not self._depth:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag in ("td", "th") and self._cell is not None and not self._depth:
            self._row["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


class _Texts(html.parser.HTMLParser):
    def __init__(self, element_id: str):
        super().__init__(convert_charrefs=True)
        self.element_id = element_id
        self.found = ""
        self._open = 0

    def handle_starttag(self, tag, attrs):
        if self._open:
            self._open += 1
        elif dict(attrs).get("id") == self.element_id:
            self._open = 1

    def handle_endtag(self, tag):
        if self._open:
            self._open -= 1

    def handle_data(self, data):
        if self._open:
            self.found += data


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None   # the 3xx answer itself is the Page


def fetch(base_url: str, path: str, *, form: dict | None = None, headers: dict | None = None,
          timeout_s: float = 60, follow: bool = True) -> Page:
    """GET ``path`` (or POST ``form`` urlencoded; a redirect is followed with a GET, as a browser
    does, unless ``follow`` is False); an error status is a Page too."""
    data = urllib.parse.urlencode(form, doseq=True).encode() if form is not None else None
    request = urllib.request.Request(urllib.parse.urljoin(base_url, path), data=data, headers=headers or {})
    opener = urllib.request.build_opener() if follow else urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return Page(response.status, response.read().decode(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Page(exc.code, exc.read().decode(), dict(exc.headers))


def fetch_json(base_url: str, path: str) -> dict:
    page = fetch(base_url, path)
    assert page.status == 200, (page.status, page.text[:500])
    return json.loads(page.text)


def quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")
