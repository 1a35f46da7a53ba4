"""The web UI in a real headless Chromium, on a dev cluster (Nimbus, two supervisors with their
logviewers, worker processes, the UI daemon: the run's shared secured one, tests/shared_clusters.py)
running the word count into its Spark table, secured with nimbus.authentication.secret: a page without login is the login form, logging in
through it shows the page (and an ended session sends the page back to it), each page loads with
no console error, the tables show the topology's components with figures that grow without a reload, the graph has
one node per component and stays readable with 30 components, deactivate/activate through the
page's buttons (an admin login is not asked the secret; a read-only login is, once, and a wrong
one is refused with the 401's message) change `storm-py list`, a log link opens the worker's log
through the logviewer (after its own login), a killed worker's last
words show on its component's page, and a banner covers a Nimbus outage. Screenshots of the
pages are saved in the test's temporary dir."""

from __future__ import annotations

import os
import shutil
import signal
from urllib.parse import unquote

import psutil
import pytest
import ui_http
from devcluster_helpers import ROOT, status_in_list, submit
from headless_chromium import chromium, console_errors, require_chromium, screenshot
from shared_clusters import READONLY_SECRET, SECRET
from testutil import QUIET_IDLE_ARGS, wait_until

pytestmark = [pytest.mark.timeout(600), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.spark, pytest.mark.browser]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)
require_chromium()

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402  (selenium: a test extra)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

SESSION_COOKIE = "storm-py-ui-session"
WORD_COUNT = ROOT / "examples" / "word_count" / "topology.py"
THIRTY = ROOT / "tests" / "devcluster" / "topologies" / "thirty" / "topology.py"
WC_COMPONENTS = {"sentences", "split", "count", "store"}


def get(base: str, path: str, **params):
    """A REST read with the admin's bearer (every read needs credentials)."""
    return ui_http.get(base, path, token=SECRET, **params)


def acked(base: str, storm_id: str) -> int:
    return sum(s["acked"] for s in get(base, f"/api/v1/topology/{storm_id}")["spouts"])


@pytest.fixture(scope="module")
def cluster(shared_dev_clusters, tmp_path_factory, spark_remote):
    """The shared secured cluster with this module's two topologies, killed at its end."""
    dev = shared_dev_clusters.acquire("secured")
    try:
        table = tmp_path_factory.mktemp("pages") / "word-count-table"
        # Paced: the pages need figures that grow, not a core of the machine for the module's minutes.
        ids = {"wc": submit(dev.conf_dir, WORD_COUNT, "wc", f"wordcount.table={table}", "topology.workers=2",
                            "wordcount.rate=300", f"spark.remote={spark_remote['spark.remote']}", *QUIET_IDLE_ARGS),
               "thirty": submit(dev.conf_dir, THIRTY, "thirty", *QUIET_IDLE_ARGS)}
        # The sink's Spark starts in a worker before the first sentence is acked.
        wait_until(lambda: acked(dev.ui_url, ids["wc"]) > 0, timeout=180, interval=1,
                   message="the word count's first acked sentences (as the UI reports them)")
        yield dev, ids
    finally:
        shared_dev_clusters.release("secured")


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture(autouse=True)
def _own_console(browser):
    """Each test sees its own pages' console errors only: what a test leaves (a failed one's
    expected 401s among them) is drained after it."""
    yield
    console_errors(browser)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


def refusals(dev, last: int = 5) -> list[str]:
    """The UI daemon's last lines saying why it refused a request (its 401s: http_auth's log)."""
    try:
        lines = (dev.log_dir / "ui.log").read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    return [ln for ln in lines if "refused" in ln][-last:]


def load(driver, url: str, ready_css: str, timeout: float = 30, dev=None):
    """Open the page and wait until the first answer has been drawn (`ready_css` present). The
    console so far was checked by the test that made it; it starts empty for this page. A
    timeout names the console's errors and (given `dev`) the UI's last refusals."""
    console_errors(driver)
    driver.get(url)
    driver.execute_script("window.__loaded_once = true")  # gone if the page reloads
    wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ready_css), timeout=timeout, interval=0.2,
               message=lambda: f"{ready_css} on {url} (now {driver.current_url}); console: {console_errors(driver)}"
                               + (f"; the UI's last refusals: {refusals(dev)}" if dev is not None else ""))


def cells(driver, table_id: str) -> dict[str, list[str]]:
    """First-column text -> the row's cells, of the table in #table_id (read in one script: the
    page redraws its tables on every poll, so element handles go stale)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(tr => [...tr.cells].map(td => td.innerText.trim()))",
        f"#{table_id} tbody tr")
    return {row[0]: row for row in rows if row and not (len(row) == 1 and row[0] in ("none", ""))}


def header_index(driver, table_id: str, title: str) -> int:
    heads = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(th => th.innerText.trim())", f"#{table_id} thead th")
    return heads.index(title)


def read_all(driver, css: str, expr: str = "e.textContent") -> list:
    """`expr` of every element matching `css`, read in one script (no stale handles)."""
    return driver.execute_script(f"return [...document.querySelectorAll(arguments[0])].map(e => {expr})", css)


def click(driver, css: str) -> None:
    """Click the element, again if a redraw replaced it between finding and clicking."""
    def attempt():
        driver.find_element(By.CSS_SELECTOR, css).click()
        return True
    wait_until(attempt, timeout=10, interval=0.2, tolerate=(StaleElementReferenceException,),
               message=f"a click on {css}")


def count(text: str) -> int:
    return int(text.replace(",", ""))


def assert_no_console_error(driver):
    errors = console_errors(driver)
    assert not errors, f"console errors on {driver.current_url}: {errors}"


def body_text(driver) -> str:
    """The page's text, "" while a navigation (the form's POST and its answer) has no body yet."""
    return driver.execute_script("return document.body ? document.body.innerText : ''") or ""


def log_in(driver, secret: str) -> None:
    """Type `secret` into the login form shown (the login page, or a 401's) and send it."""
    field = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "form#login input#secret"), timeout=30,
                       interval=0.2, message=lambda: f"the login form on {driver.current_url}")[0]
    field.clear()
    field.send_keys(secret)
    driver.find_element(By.ID, "login-submit").click()


def test_a_page_without_login_is_the_login_form(cluster, browser, shots):
    dev, ids = cluster
    browser.get(dev.ui_url + "/")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "form#login input#secret[type=password]"),
               timeout=30, interval=0.2, message="the login form instead of the cluster page")
    text = body_text(browser)
    assert "credentials" in text and "Authorization: Bearer" in text
    assert not browser.find_elements(By.ID, "topologies") and ids["wc"] not in browser.page_source
    screenshot(browser, shots / "ui-login.png")
    log_in(browser, "not-the-secret")  # a wrong secret: the form again, saying so
    wait_until(lambda: "Wrong secret" in body_text(browser), timeout=30, interval=0.2,
               message="the login form saying the secret was wrong")
    assert not browser.get_cookies()
    console_errors(browser)  # the 401s of these pages are expected


def test_logging_in_through_the_form_shows_the_cluster_page(cluster, browser):
    dev, ids = cluster
    browser.get(f"{dev.ui_url}/login?next=/index.html")
    log_in(browser, SECRET)
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#topologies tbody a"), timeout=30, interval=0.2,
               message=lambda: f"the cluster page after logging in; console: {console_errors(browser)}")
    assert browser.current_url == f"{dev.ui_url}/index.html"
    assert {"wc", "thirty"} <= set(cells(browser, "topologies"))
    cookie = browser.get_cookie(SESSION_COOKIE)
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie") == ""  # out of the page scripts' reach
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "form#logout button"), timeout=10, interval=0.2,
               message="the header's logout button")
    assert browser.find_element(By.CSS_SELECTOR, "form#logout button").text == "Log out (admin)"
    assert_no_console_error(browser)


def test_an_ended_session_sends_the_page_to_the_login_and_back(cluster, browser):
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#spouts tbody a", dev=dev)
    browser.delete_cookie(SESSION_COOKIE)  # as when it expires: the next poll gets a 401
    wait_until(lambda: "/login?next=" in browser.current_url, timeout=30, interval=0.2,
               message="the page to go to the login page on a 401")
    log_in(browser, SECRET)
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#spouts tbody a"), timeout=30, interval=0.2,
               message="the topology page again after logging in")
    assert browser.current_url == f"{dev.ui_url}/topology.html?id={ids['wc']}"
    console_errors(browser)  # the poll's 401 is expected
    # The header's button ends the session: back to the login form, no cookie; then in again.
    click(browser, "form#logout button")
    wait_until(lambda: browser.current_url == f"{dev.ui_url}/login", timeout=30, interval=0.2,
               message="the login page after logging out")
    assert browser.get_cookie(SESSION_COOKIE) is None
    log_in(browser, SECRET)
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#topologies tbody a"), timeout=30, interval=0.2,
               message="the cluster page after logging in again")


def test_cluster_page(cluster, browser, shots):
    dev, ids = cluster
    load(browser, dev.ui_url + "/", "#topologies tbody a", dev=dev)
    names = cells(browser, "topologies")
    assert {"wc", "thirty"} <= set(names), names
    assert names["wc"][1] == ids["wc"] and names["wc"][3] == "ACTIVE"
    assert len(cells(browser, "supervisors")) == 2
    assert cells(browser, "nimbus")
    assert_no_console_error(browser)
    screenshot(browser, shots / "ui-cluster.png")


def test_topology_page_figures_grow_without_a_reload(cluster, browser, shots):
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#spouts tbody a", dev=dev)
    spouts, bolts = cells(browser, "spouts"), cells(browser, "bolts")
    assert set(spouts) | set(bolts) == WC_COMPONENTS, (spouts, bolts)
    col = header_index(browser, "spouts", "Acked")
    first = count(spouts["sentences"][col])
    executed = header_index(browser, "bolts", "Executed")
    first_split = count(bolts["split"][executed])
    wait_until(lambda: count(cells(browser, "spouts")["sentences"][col]) > first, timeout=60, interval=0.5,
               message="the spout's acked count to grow on the page")
    wait_until(lambda: count(cells(browser, "bolts")["split"][executed]) > first_split, timeout=60, interval=0.5,
               message="split's executed count to grow on the page")
    assert browser.execute_script("return window.__loaded_once === true"), "the page reloaded itself"
    # Per-second rates next to the counts (the REST answer's, over the last 10 minutes).
    acked_rate, executed_rate = header_index(browser, "spouts", "Acked/s"), header_index(browser, "bolts", "Executed/s")
    wait_until(lambda: float(cells(browser, "spouts")["sentences"][acked_rate].replace(",", "")) > 0
               and float(cells(browser, "bolts")["split"][executed_rate].replace(",", "")) > 0,
               timeout=60, interval=0.5, message="the spout's acked/s and split's executed/s on the page")
    # Capacity cells are figures with three decimals; the workers table links to the logviewer.
    capacity = header_index(browser, "bolts", "Capacity")
    assert all(float(row[capacity]) >= 0 for row in cells(browser, "bolts").values())
    links = read_all(browser, "#workers a.log-link", "e.href")
    assert links and all("/log?file=" in href for href in links), links
    assert sorted(read_all(browser, "#graph a.node", "e.dataset.id")) == sorted(WC_COMPONENTS)
    labels = read_all(browser, "#graph .edge text")
    assert "default · fields" in labels, labels
    assert_no_console_error(browser)
    screenshot(browser, shots / "ui-topology.png")


def test_graph_click_opens_the_component_page(cluster, browser):
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#graph a.node", dev=dev)
    click(browser, '#graph a.node[data-id="count"]')
    wait_until(lambda: "component.html" in browser.current_url and browser.find_elements(
        By.CSS_SELECTOR, "#executors tbody tr td"), timeout=30, interval=0.2, message="count's component page")
    assert "id=count" in browser.current_url
    # The window selector keeps its choice in the URL and asks for that window.
    Select(browser.find_element(By.ID, "window")).select_by_value("600")
    wait_until(lambda: "window=600" in browser.current_url, timeout=10, interval=0.2, message="window=600 in the URL")
    wait_until(lambda: read_all(browser, "#executors tbody tr td"), timeout=30, interval=0.2,
               message="the executors of the 10-minute window")
    assert_no_console_error(browser)


def test_graph_of_thirty_components_is_layered_and_readable(cluster, browser, shots):
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/topology.html?id={ids['thirty']}", "#graph a.node", dev=dev)
    boxes = browser.execute_script("""
        return [...document.querySelectorAll('#graph a.node')].map(a => {
            const r = a.querySelector('rect').getBBox(), t = a.querySelector('text').getBBox();
            return {id: a.dataset.id, x: r.x, y: r.y, w: r.width, h: r.height, tw: t.width};
        });""")
    assert len(boxes) == 30
    for b in boxes:
        assert b["tw"] <= b["w"], f"{b['id']}'s label is wider than its box"
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or \
                a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]
            assert apart, f"{a['id']} overlaps {b['id']}"
    # Layered: every subscription goes left to right, one column per layer.
    x = {b["id"]: b["x"] for b in boxes}
    edges = browser.execute_script("return [...document.querySelectorAll('#graph .edge')]"
                                   ".map(g => [g.dataset.from, g.dataset.to])")
    assert len(edges) == 27 + 13  # every bolt's first input, and a second for every other bolt
    assert all(x[src] < x[dst] for src, dst in edges)
    assert len(set(x.values())) == 6
    assert_no_console_error(browser)
    screenshot(browser, shots / "ui-graph-30.png")


def test_component_page_log_link_opens_the_workers_log(cluster, browser, shots):
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/component.html?topology_id={ids['wc']}&id=split", "#executors tbody a.log-link", dev=dev)
    rows = cells(browser, "executors")
    assert len(rows) == 2
    port = header_index(browser, "executors", "Port")
    assert all(row[port].isdigit() for row in rows.values())
    inputs = cells(browser, "inputs")
    assert "sentences" in inputs, inputs
    assert "default" in cells(browser, "outputs")
    assert_no_console_error(browser)
    screenshot(browser, shots / "ui-component.png")
    href = read_all(browser, "#executors tbody a.log-link", "e.href")[0]
    assert href.startswith("http://127.0.0.1:") and "/log?file=" in href
    ports = [v.extra["port"] for v in dev.logviewers]
    assert any(href.startswith(f"http://127.0.0.1:{p}/") for p in ports), (href, ports)
    browser.get(href)  # the logviewer has its own login: its 401 page is the form
    assert not browser.find_elements(By.CSS_SELECTOR, "pre#log")
    log_in(browser, READONLY_SECRET)
    console_errors(browser)  # the logviewer's 401
    shown = wait_until(lambda: read_all(browser, "pre#log", "e.textContent"), timeout=30, interval=0.5,
                       message=f"the worker log at {href}")[0]
    name = unquote(href.split("file=", 1)[1].split("&")[0])
    on_disk = [p.read_text(errors="replace") for p in dev.log_dir.glob(f"*/workers-artifacts/{name}")]
    assert shown.strip() and any(shown[:300] in text for text in on_disk), (name, shown[:300])
    assert_no_console_error(browser)


def test_supervisor_page(cluster, browser):
    dev, ids = cluster
    sup = next(s for s in get(dev.ui_url, "/api/v1/supervisor/summary")["supervisors"] if s["slotsUsed"])
    load(browser, f"{dev.ui_url}/supervisor.html?id={sup['id']}", "#slots tbody tr td", dev=dev)
    slots = cells(browser, "slots")
    assert len(slots) == dev.n_slots and any(row[1] in ("wc", "thirty") for row in slots.values()), slots
    assert cells(browser, "workers")
    assert_no_console_error(browser)


def _confirm_dialog(browser):
    return wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "dialog#confirm[open]"), timeout=10,
                      interval=0.1, message="the confirmation dialog")[0]


def test_deactivate_and_activate_through_the_buttons(cluster, browser):
    dev, ids = cluster
    # An admin login acts without typing the secret again (cancelled here).
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#action-deactivate:not([disabled])", dev=dev)
    browser.find_element(By.ID, "action-deactivate").click()
    dialog = _confirm_dialog(browser)
    assert not dialog.find_element(By.ID, "confirm-secret").is_displayed()
    dialog.find_element(By.ID, "confirm-cancel").click()
    # A read-only login is asked for the admin's secret.
    browser.get(f"{dev.ui_url}/login?next=/topology.html?id={ids['wc']}")
    log_in(browser, READONLY_SECRET)
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#action-deactivate:not([disabled])", dev=dev)
    browser.find_element(By.ID, "action-deactivate").click()
    dialog = _confirm_dialog(browser)
    secret = dialog.find_element(By.ID, "confirm-secret")
    assert secret.is_displayed(), "the page must ask for the cluster's secret before the first action"
    secret.send_keys("not-the-secret")
    dialog.find_element(By.ID, "confirm-ok").click()
    refusal = wait_until(lambda: [e for e in dialog.find_elements(By.CSS_SELECTOR, ".refusal") if e.is_displayed()],
                         timeout=15, interval=0.2, message="the 401's message in the dialog")[0]
    assert "auth" in refusal.text and "wrong bearer secret" in refusal.text, refusal.text
    assert status_in_list(dev.conf_dir, "wc") == "ACTIVE"
    assert "/login" not in browser.current_url  # a refused action stays on the page
    # The browser logs the refused request itself; nothing else may be there.
    assert all("/deactivate" in e and "401" in e for e in console_errors(browser))
    secret.send_keys(SECRET)
    dialog.find_element(By.ID, "confirm-ok").click()
    wait_until(lambda: status_in_list(dev.conf_dir, "wc") == "INACTIVE", timeout=30, interval=0.5,
               message="storm-py list to show wc INACTIVE after the page's Deactivate")
    wait_until(lambda: browser.find_element(By.ID, "status").text == "INACTIVE", timeout=20, interval=0.2,
               message="the page's status to follow")
    browser.find_element(By.ID, "action-activate").click()
    dialog = _confirm_dialog(browser)
    assert not dialog.find_element(By.ID, "confirm-secret").is_displayed(), "the secret is asked only once"
    dialog.find_element(By.ID, "confirm-ok").click()
    wait_until(lambda: status_in_list(dev.conf_dir, "wc") == "ACTIVE", timeout=30, interval=0.5,
               message="storm-py list to show wc ACTIVE after the page's Activate")
    wait_until(lambda: browser.find_element(By.ID, "status").text == "ACTIVE", timeout=20, interval=0.2,
               message="the page's status to follow")
    assert_no_console_error(browser)


def _worker_of(dev, storm_id: str) -> psutil.Process:
    pids = dev.worker_pids(storm_id)
    if not pids:
        raise AssertionError(f"no worker process of {storm_id}")
    return psutil.Process(min(pids.values()))


def test_a_killed_workers_last_words_show_on_its_component_page(cluster, browser):
    dev, ids = cluster
    worker = _worker_of(dev, ids["thirty"])
    os.kill(worker.pid, signal.SIGKILL)
    load(browser, f"{dev.ui_url}/component.html?topology_id={ids['thirty']}&id=spout-1", "#executors tbody tr td", dev=dev)
    notice = wait_until(lambda: read_all(browser, "#dead-workers .dead-worker", "e.innerText"), timeout=60,
                        interval=0.5, message="the dead worker's notice on the component page")[0]
    assert "SIGKILL" in notice and "exited" in notice, notice
    tails = read_all(browser, "#dead-workers .dead-worker pre.log", "e.textContent")
    assert tails and tails[0].strip(), "the log's last lines"
    assert_no_console_error(browser)


@pytest.fixture(scope="module")
def outage_on_the_page(cluster, browser):
    """What the topology page showed while Nimbus was down and once it was back. A module
    fixture: the restarted Nimbus belongs to the cluster (the fixture's), not to a test."""
    dev, ids = cluster
    load(browser, f"{dev.ui_url}/topology.html?id={ids['wc']}", "#spouts tbody a", dev=dev)
    seen = {"before": browser.find_element(By.ID, "banner").is_displayed()}
    dev.stop_nimbus(kill=True)
    try:
        wait_until(lambda: browser.find_element(By.ID, "banner").is_displayed(), timeout=30, interval=0.2,
                   message="the outage banner")
        seen["during"] = browser.find_element(By.ID, "banner").text
        seen["figures during"] = cells(browser, "spouts")
    finally:
        dev.start_nimbus_again()
    wait_until(lambda: not browser.find_element(By.ID, "banner").is_displayed(), timeout=90, interval=0.5,
               message="the banner to go once Nimbus is back")
    seen["reloaded"] = not browser.execute_script("return window.__loaded_once === true")
    seen["console"] = console_errors(browser)
    return seen


def test_a_banner_covers_a_nimbus_outage(outage_on_the_page):
    seen = outage_on_the_page
    assert seen["before"] is False
    assert "Nimbus is not answering" in seen["during"], seen["during"]
    assert "sentences" in seen["figures during"], "the last figures stay on the page"
    assert not seen["reloaded"], "the page reloaded itself"
    # The outage's failed requests (503) are the only console errors allowed here.
    assert all("503" in e for e in seen["console"]), seen["console"]
