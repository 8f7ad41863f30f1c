"""The /status page in a real browser (Debian's headless Chromium over CDP).

Against tests/helpers/web_demo (a fake server whose backup advances every
tick): the page shows the running backup, its holder, attempt and a
progress value that advances with live updates; label values and error
messages holding <script> and other markup appear as text and never become
elements; the page reads well at phone width. Screenshots are saved under
$CAIRN_TMP and copied to tests/artifacts/ (git-ignored).
"""
import os
import signal
import urllib.request

from cairntest import case, main, wait_for
from cdp import CHROMIUM, Chromium
from webcheck import BACKUP_JS, save_artifact, start_demo

def start(t, *extra):
    demo, port = start_demo(t, *extra, status_interval_ms=200)
    return demo, "http://127.0.0.1:%d" % port


def browser(t):
    if not os.path.exists(CHROMIUM):
        t.skip("chromium not installed")
    br = Chromium(t.mkdir("browser"))
    t.on_cleanup(br.close)
    return br


@case
def page_shows_live_backup_progress(t):
    demo, url = start(t)
    br = browser(t)
    page = br.page()
    page.viewport(1280, 900)
    page.navigate(url + "/status")
    page.wait_js("window.cairnUpdates >= 1", 15, "first update of the page")
    first = page.evaluate(BACKUP_JS)
    t.check(first is not None, "no running backup card on the page")
    t.check(first["name"].startswith("nightly-20261202-"), "backup name: %r" % first["name"])
    t.check(first["name"] in first["text"], "backup name not shown as text")
    t.eq(first["holder"], "demo-1", "holder shown")
    t.eq(first["attempt"], "attempt 2", "attempt shown")
    t.eq(first["max"], 4000, "total items (aria-valuemax)")
    t.check(first["width"].endswith("%"), "progress bar width %r" % first["width"])
    t.check("/ 4,000" in first["items"], "items text %r" % first["items"])
    # Wait for a live update that moves the backup forward.
    later = None

    def advanced():
        nonlocal later
        later = page.evaluate(BACKUP_JS)
        return (later and later["updates"] > first["updates"] and
                later["name"] == first["name"] and later["now"] > first["now"])
    wait_for(advanced, 15, "the progress value to advance")
    t.check(later["items"] != first["items"], "items text did not change: %r" % later["items"])
    # The other sections are filled from the same document.
    facts = page.evaluate("""({
      server: document.getElementById('server').textContent,
      servers: document.querySelectorAll('#servers tbody tr').length,
      restores: document.querySelectorAll('.op[data-kind="restore"]').length,
      volumes: document.querySelectorAll('.op[data-kind="volume-backup"]').length,
      volumesDone: document.querySelectorAll('#volumes-done tr.volume-result').length,
      schedules: document.querySelectorAll('#schedules tr.schedule').length,
      local: document.querySelectorAll('.op[data-kind="backup"] .local').length,
      totals: (document.querySelector('#server .totals') || {}).textContent,
      waiting: document.getElementById('waiting').textContent,
      recent: document.querySelectorAll('#recent tr.result').length,
      banner: document.getElementById('banner').className
    })""")
    t.check("demo-1" in facts["server"] and "held" in facts["server"], "server facts: %r" % facts["server"])
    t.eq(facts["servers"], 3, "servers listed")
    t.eq(facts["restores"], 1, "restores shown")
    t.eq(facts["volumes"], 1, "running volume operations shown")
    t.eq(facts["volumesDone"], 1, "finished volume operations shown")
    t.eq(facts["schedules"], 1, "schedules shown")
    t.eq(facts["local"], 1, "the backup this server holds is marked")
    t.check("2 running" in (facts["totals"] or "") and "7 backups" in (facts["totals"] or ""),
            "cluster totals: %r" % facts["totals"])
    t.check("hourly-20261202-1300" in facts["waiting"], "waiting item shown")
    t.check(facts["recent"] >= 2, "recent results shown")
    t.eq(facts["banner"], "", "error banner")
    save_artifact(t, page, "web-status-desktop.png")

    # Phone width: nothing wider than the screen, the backup still shown.
    page.viewport(390, 844, scale=2, mobile=True)
    page.wait_js("window.innerWidth === 390", 5, "phone viewport")
    wide = page.evaluate("document.documentElement.scrollWidth")
    t.check(wide <= 392, "page is %spx wide on a 390px phone" % wide)
    vis = page.evaluate("document.querySelector('.op[data-kind=\"backup\"]').getBoundingClientRect().width")
    t.check(0 < vis <= 390, "backup card width %s on a phone" % vis)
    save_artifact(t, page, "web-status-phone.png")
    page.close()


@case
def markup_in_values_shows_as_text(t):
    demo, url = start(t)
    demo.signal(signal.SIGUSR1)  # adds failed results whose messages hold markup
    wait_for(lambda: "nightly-failed-1" in urllib.request.urlopen(url + "/status.json").read().decode(),
             10, "failed backup in status.json")
    br = browser(t)
    page = br.page()
    page.navigate(url + "/status")
    page.wait_js("document.querySelectorAll('#recent tr.result').length >= 5", 15, "recent results")
    r = page.evaluate("""({
      pwned: window.__pwned === undefined ? null : window.__pwned,
      scripts: document.scripts.length,
      imgs: document.getElementsByTagName('img').length,
      bolds: Array.prototype.filter.call(document.querySelectorAll('main b'),
                                         function (b) { return b.textContent === 'bad'; }).length,
      text: document.body.textContent
    })""")
    t.eq(r["pwned"], None, "window.__pwned (an injected script ran)")
    t.eq(r["scripts"], 1, "script elements (only the page's own)")
    t.eq(r["imgs"], 0, "img elements (injected markup)")
    t.eq(r["bolds"], 0, "<b> from an error message became an element")
    t.check("note=<script>window.__pwned=1</script>" in r["text"],
            "label value with <script> not shown as text")
    t.check('<img src=x onerror="window.__pwned=2"><script>window.__pwned=3</script> & more' in r["text"],
            "error message with markup not shown as text")
    t.check('spec.includedNamespaces: <b>bad</b> glob "["' in r["text"],
            "validation message not shown as text")
    save_artifact(t, page, "web-status-escaping.png")
    page.close()


@case
def page_works_with_bearer_token(t):
    token_file = t.path("token")
    with open(token_file, "w") as f:
        f.write("browser-token-123\n")
    demo, url = start(t, "--token-file", token_file)
    br = browser(t)
    page = br.page()
    page.call("Network.enable")
    page.call("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer browser-token-123"}})
    page.navigate(url + "/status")
    page.wait_js("window.cairnUpdates >= 1", 15, "an update with the token")
    t.check(page.evaluate(BACKUP_JS) is not None, "backup not shown with the token")
    # Without the header the page itself is refused.
    page.call("Network.setExtraHTTPHeaders", {"headers": {}})
    page.navigate(url + "/status")
    body = page.evaluate("document.body ? document.body.textContent : ''")
    t.check("bearer token required" in body, "page without token: %r" % body[:200])
    page.close()


main()
