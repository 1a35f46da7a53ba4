"""The web pages as the UI daemon serves them (Flask's test client; the browser tests drive them
on a real cluster): every page and module is served with a type a browser runs, every module's
imports exist, the pages call only the REST API, and the files ship in the wheel's package data."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from daemons.ui.app import PAGES, STATIC, make_app

pytestmark = pytest.mark.timeout(30)
REPO = Path(__file__).resolve().parents[2]


class NoNimbus:
    def call(self, op, **args):
        raise AssertionError(f"serving a page must not call Nimbus ({op})")


@pytest.fixture
def client():
    return make_app(NoNimbus(), {}, "127.0.0.1", 6627).test_client()


def test_every_page_is_served_as_html(client):
    for path in ["/", *(f"/{p}" for p in PAGES)]:
        answer = client.get(path)
        assert answer.status_code == 200 and answer.mimetype == "text/html", path
        assert b'type="module"' in answer.data


def test_an_unknown_page_is_a_404_naming_the_pages(client):
    answer = client.get("/nope.html")
    assert answer.status_code == 404 and "index.html" in answer.get_json()["errorMessage"]


def test_modules_are_served_as_javascript_and_their_imports_exist(client):
    modules = sorted((STATIC / "js").glob("*.js"))
    assert modules
    for module in modules:
        answer = client.get(f"/static/js/{module.name}")
        assert answer.status_code == 200 and answer.mimetype in ("text/javascript", "application/javascript")
        for target in re.findall(r'from "(\./[^"]+)"', module.read_text()):
            assert (module.parent / target).is_file(), f"{module.name} imports {target}, which does not exist"
    for page in PAGES:
        for ref in re.findall(r'(?:src|href)="(static/[^"]+)"', (STATIC / page).read_text()):
            assert client.get(f"/{ref}").status_code == 200, f"{page} refers to {ref}"


def test_the_pages_links_to_the_api_answer_and_its_index_lists_every_route(client):
    # The footer's /api/v1 link must answer (it was a 404 to anyone who typed it) without
    # asking Nimbus, and the index it leads to names every REST route.
    links = [ref for page in PAGES for ref in re.findall(r'href="(api/v1[^"]*)"', (STATIC / page).read_text())]
    assert links
    for ref in links:
        answer = client.get(f"/{ref}")
        assert answer.status_code == 200 and answer.mimetype == "application/json", ref
    for path in ("/api/v1", "/api/v1/"):
        index = client.get(path).get_json()
        listed = {(e["method"], e["path"]) for e in index["endpoints"]}
        assert {("GET", "/api/v1/cluster/summary"), ("GET", "/api/v1/topology/{storm_id}"),
                ("POST", "/api/v1/topology/{storm_id}/kill/{wait}")} <= listed, path
        rules = {r.rule for r in client.application.url_map.iter_rules() if r.rule.startswith("/api/v1/")}
        assert len(listed) >= len(rules) - 1  # every route but the index itself


def test_pages_read_only_the_rest_api():
    for module in (STATIC / "js").glob("*.js"):
        text = module.read_text().replace('"http://www.w3.org/2000/svg"', "")  # a namespace, not a request
        assert "http://" not in text and "https://" not in text, f"{module.name} reaches outside the UI daemon"
        for call in re.findall(r"fetch\(([^,)]+)", text):
            assert call.startswith("API + "), f"{module.name}: fetch({call}) is not the REST API"


def test_the_static_files_ship_in_the_package():
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["daemons"]
    for path in STATIC.rglob("*"):
        if path.is_file():
            rel = path.relative_to(REPO / "daemons").as_posix()
            assert any(fnmatch(rel, p) for p in patterns), f"{rel} is not in pyproject's package-data"
