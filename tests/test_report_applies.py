"""Reports say what they leave out and show only what applies, over stores filled by real runs:
an HTTP search that finds no peak (no SPECsfs summary, no peak star), and trials at more loads than the
latency-CDF figure draws against a server that saturates (the overloaded loads are drawn, the rest named)."""

import http.server
import re
import threading
import time

import pytest
from conftest import run_cli
from peakbench.store import Store

SERVICE_S = 0.010  # one request at a time, 10 ms each: 100 requests/s
RATES = (20, 40, 60, 80, 100, 120, 140, 160, 180, 200)


class OneAtATime(http.server.SimpleHTTPRequestHandler):
    """A real HTTP/1.1 file server with one worker and a fixed service time, so it saturates at a known rate."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:  # held while serving, not while a kept-alive connection waits for its next request
            time.sleep(SERVICE_S)
            super().do_GET()

    def do_HEAD(self):
        with self.lock:
            time.sleep(SERVICE_S)
            super().do_HEAD()

    def do_OPTIONS(self):  # the engine's reachability probe
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Quiet(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the engine closes kept-alive connections with replies in flight when a trial ends


@pytest.fixture
def slow_server(tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()

    def handler(*args, **kwargs):
        return OneAtATime(*args, directory=str(docroot), **kwargs)

    server = Quiet(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", docroot
    server.shutdown()
    server.server_close()


def _caption(page: str, figure_id: str) -> str:
    match = re.search(rf'<figure[^>]*id="{figure_id}".*?<figcaption>(.*?)</figcaption>', page, re.DOTALL)
    assert match, figure_id
    return re.sub(r"<[^>]+>", "", match.group(1))


def test_an_http_search_without_a_peak_claims_no_sfs_summary_and_no_star(engine_path, nginx, tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)
    db, html = tmp_path / "p.db", tmp_path / "report.html"
    # Rsat of 10 s: nginx never gets near it by 60 requests/s, so the search ends without a peak.
    done = run_cli(
        "search",
        "web-server",
        "--target",
        server.url,
        "--docroot",
        str(docroot),
        "--db",
        str(db),
        "--runlength",
        "1",
        "--warmup",
        "0.2",
        "--start-rate",
        "20",
        "--max-rate",
        "60",
        "--rsat",
        "10000",
        "--max-trials",
        "8",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    done = run_cli("report", "search:1", "--db", str(db), "--html", str(html))
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    assert "SPECsfs summary" not in page and "sfssum" not in page
    load_curve = _caption(page, "fig-load-curve")
    assert "star" not in load_curve and "dashed line marks the peak" not in load_curve
    assert "search 1 has no peak to mark: no peak (" in load_curve
    with Store(db) as store:  # the red cross is explained only when a measured trial's generator fell behind
        trials = [t for t in store.search_trials(1) if t.get("result")]
    longest = {t["rate"]: max(u["spec"]["load"]["runtime_s"] for u in trials if u["rate"] == t["rate"]) for t in trials}
    fell_behind = any(
        t["result"].get("generator_saturated") for t in trials if t["spec"]["load"]["runtime_s"] == longest[t["rate"]]
    )
    assert ("red cross" in load_curve) == fell_behind
    assert "no load factor: the search found no peak" in _caption(page, "fig-search-trace-search-1")


def test_the_latency_figure_draws_the_overloaded_loads_and_names_those_left_out(engine_path, slow_server, tmp_path):
    url, docroot = slow_server
    db, html = tmp_path / "p.db", tmp_path / "report.html"
    for rate in RATES:
        done = run_cli(
            "run",
            "web-server",
            "--target",
            url,
            "--docroot",
            str(docroot),
            "--rate",
            str(rate),
            "--warmup",
            "0",
            "--runtime",
            "1",
            "--db",
            str(db),
        )
        assert done.returncode == 0, done.stderr
    done = run_cli("report", f"trial:1-{len(RATES)}", "--db", str(db), "--html", str(html))
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    caption = _caption(page, f"fig-latency-cdf-trials-1-{len(RATES)}")
    drawn = int(re.search(rf"at (\d+) of its {len(RATES)} offered loads", caption).group(1))
    left_out = [
        float(v.replace(",", "")) for v in re.search(r"left out: ([\d, .]+) ops/s", caption).group(1).split(", ")
    ]
    assert drawn >= 8 and len(left_out) == len(RATES) - drawn
    # The server saturates at 100 requests/s: every load above that is drawn, none is left out.
    assert all(load < 1 / SERVICE_S for load in left_out), caption
    assert "SPECsfs summary" not in page
