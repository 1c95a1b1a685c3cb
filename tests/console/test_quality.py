"""The console for people: axe-core finds no serious or critical accessibility problem on any
main page, the main flows work from the keyboard alone, the screenshots of docs/console come from
here, and the pages of a store of 2,000 memories render within the budget."""

import json
import os
import re
import statistics

from axe_playwright_python.sync_playwright import Axe
from conftest import SHOTS, new_page, sign_in

# The pages people use most, with the memory and diff of the `big` store (2,000 memories).
def main_pages(console):
    big = console.memories("big", prefix="/topic-07/")
    memory = big["/topic-07/note-0007.md"]["id"]
    return {
        "stores": "/console/stores",
        "store": "/console/stores/big",
        "folder": "/console/stores/big?dir=%2Fmemories%2Ftopic-07",
        "memory": f"/console/stores/big/memories/{memory}",
        "diff": None,  # found from the memory page's form
        "search": "/console/stores/big/search?q=number+49&mode=ranked",
        "keys": "/console/keys",
        "settings": "/console/stores/big/settings",
        "delete": f"/console/stores/big/memories/{memory}/delete",
        "missing": "/console/stores/big/memories/mem_ffffffffffffff00",
    }


def diff_url(page, console, memory_page):
    page.goto(console.url + memory_page)
    page.get_by_role("button", name="Show the differences").click()
    return page.url.removeprefix(console.url)


def test_no_serious_or_critical_accessibility_findings(visitor, console):
    axe = Axe()
    found = {}
    visitor.goto(console.url + "/console/login")
    pages = {"login": None}
    sign_in(visitor, console, console.admin)
    pages.update(main_pages(console))
    pages["diff"] = diff_url(visitor, console, pages["memory"])
    for name, path in pages.items():
        if path is None:
            visitor.goto(console.url + "/console/login")
            visitor.context.clear_cookies()
            visitor.goto(console.url + "/console/login")
        else:
            visitor.goto(console.url + path)
        results = axe.run(visitor, options={"resultTypes": ["violations"]})
        bad = [
            f"{v['id']} ({v['impact']}): {len(v['nodes'])} nodes, e.g. {v['nodes'][0]['html'][:120]}"
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        if bad:
            found[name] = bad
        if path is None:
            sign_in(visitor, console, console.admin)
    assert found == {}


def focused(page):
    return page.evaluate(
        "() => { const e = document.activeElement; return e ? (e.innerText || e.value || '').trim() : '' }"
    )


def tab_to(page, name, limit=80):
    """Presses Tab until the element named `name` has the focus (at most `limit` times)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if focused(page) == name:
            return
    raise AssertionError(f"{name!r} was not reached with {limit} Tab presses")


def enter(page):
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_the_main_flows_by_keyboard_alone(visitor, console):
    console.tool("keyboard", {"command": "create", "path": "/memories/plans/trip.md", "file_text": "go to Rome\n"})
    memory = console.memories("keyboard")["/plans/trip.md"]["id"]
    status, _ = console.api("POST", f"/v1/memory_stores/keyboard/memories/{memory}", {"content": "go to Florence\n"})
    assert status == 200
    visitor.goto(console.url + "/console")
    # The key field has the focus on arrival.
    assert visitor.evaluate("document.activeElement.id") == "key"
    visitor.keyboard.type(console.admin)
    enter(visitor)
    assert visitor.url.endswith("/console/stores")
    # The first stop skips to the content.
    visitor.keyboard.press("Tab")
    assert focused(visitor) == "Skip to content"
    visitor.keyboard.press("Enter")
    tab_to(visitor, "keyboard")
    enter(visitor)
    tab_to(visitor, "plans/")
    enter(visitor)
    tab_to(visitor, "trip.md")
    enter(visitor)
    assert visitor.locator("h1").inner_text() == "/memories/plans/trip.md"
    # Compare the two versions, from the form's defaults.
    tab_to(visitor, "Show the differences")
    enter(visitor)
    assert visitor.locator("table.diff ins").all_inner_texts() == ["Florence"]
    visitor.go_back()
    # Restore the first version, confirmed from the keyboard.
    tab_to(visitor, "Restore…")
    enter(visitor)
    tab_to(visitor, "Restore")
    enter(visitor)
    assert visitor.locator("table.content td").inner_text() == "go to Rome"
    # Delete: confirmation page, then cancel.
    tab_to(visitor, "Delete this memory…")
    enter(visitor)
    tab_to(visitor, "Cancel")
    enter(visitor)
    assert "/plans/trip.md" in console.memories("keyboard")
    tab_to(visitor, "Sign out")
    enter(visitor)
    assert visitor.locator("h1").inner_text() == "Signed out"


def test_screenshots_of_the_main_pages(browser, console):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in [("desktop", {"width": 1280, "height": 800}), ("mobile", {"width": 390, "height": 844})]:
        page, watch = new_page(browser, console, viewport)
        page.goto(console.url + "/console/login")
        written = [SHOTS / f"login-{size}.png"]
        page.screenshot(path=written[0])
        sign_in(page, console, console.admin)
        pages = main_pages(console)
        pages["diff"] = diff_url(page, console, pages["memory"])
        for name in ["stores", "folder", "memory", "diff", "search", "keys"]:
            page.goto(console.url + pages[name])
            written.append(SHOTS / f"{name}-{size}.png")
            page.screenshot(path=written[-1])
            # Nothing is wider than the screen.
            assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], (name, size)
        page.context.close()
        assert watch.events == []
        # Each a PNG of the viewport's size (IHDR: width and height, big-endian, at bytes 16-24).
        for shot in written:
            head = shot.read_bytes()[:24]
            assert head[:8] == b"\x89PNG\r\n\x1a\n", shot
            assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (
                viewport["width"],
                viewport["height"],
            ), shot


def test_pages_of_a_store_of_2000_memories_render_within_budget(visitor, console):
    """The server's time for each main page (its Server-Timing), over 5 loads each. The budget
    (50 ms) is for a release build; the debug build the test command uses is held to 10 times
    that. The figures go to $MEMKV_CONSOLE_REPORT when set (BENCHMARKS.md)."""
    sign_in(visitor, console, console.admin)
    status, store = console.api("GET", "/v1/memory_stores/big")
    pages = main_pages(console)
    pages["diff"] = diff_url(visitor, console, pages["memory"])
    del pages["missing"]
    budget = float(os.environ.get("MEMKV_CONSOLE_BUDGET_MS", "500"))
    figures = {}
    for name, path in pages.items():
        times = []
        for _ in range(5):
            response = visitor.goto(console.url + path)
            assert response.status == 200, name
            timing = response.headers["server-timing"]
            times.append(float(re.fullmatch(r"app;dur=([0-9.]+)", timing).group(1)))
        figures[name] = {"median_ms": statistics.median(times), "max_ms": max(times)}
    report = os.environ.get("MEMKV_CONSOLE_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump({"memories": 2000, "pages": figures}, f, indent=2)
    print(json.dumps(figures))
    slow = {n: f for n, f in figures.items() if f["median_ms"] > budget}
    assert slow == {}, f"over {budget} ms: {slow}"
