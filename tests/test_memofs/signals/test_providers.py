"""Provider adapters against a real HTTP server on 127.0.0.1 that answers in each
provider's documented shape (no monkeypatching)."""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memofs.signals.embedders import CloudflareEmbedder, EmbedderError, OpenAIEmbedder, RetryPolicy, VoyageEmbedder
from memofs.signals.embedders.providers import parse_retry_after

DIM = 6


def raw_vector(text: str) -> list[float]:
    """A deterministic, text-dependent vector the fake server returns (not normalised)."""
    codes = [ord(c) for c in text] or [0]
    return [float(len(text)), float(sum(codes) % 97), float(codes[0]), 1.0, float(len(text.split())), 2.5][:DIM]


def expected(texts: list[str]) -> np.ndarray:
    m = np.array([raw_vector(t) for t in texts], dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


class FakeProviders(ThreadingHTTPServer):
    """``script``: queued (status, headers, body-bytes | None) answers; None body means
    "answer normally". Every request is logged as (path, headers, json body)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[tuple[int, dict[str, str], bytes | None]] = []
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self.delay_s = 0.0
        self.dim = DIM
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeProviders

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append((self.path, dict(self.headers), body))
            status, headers, payload = self.server.script.pop(0) if self.server.script else (200, {}, None)
        time.sleep(self.server.delay_s)
        if payload is None and status == 200:
            payload = json.dumps(self.answer(body)).encode()
        payload = payload or b'{"error": "scripted"}'
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and hung up, as the timeout test intends

    def answer(self, body: dict) -> dict:
        pad = lambda v: (v + [0.5] * self.server.dim)[: self.server.dim]  # noqa: E731
        if "/ai/run/" in self.path:  # Cloudflare Workers AI
            rows = [pad(raw_vector(t)) for t in body["text"]]
            return {"result": {"shape": [len(rows), self.server.dim], "data": rows, "pooling": "mean"},
                    "success": True, "errors": [], "messages": []}
        items = [{"object": "embedding", "index": i, "embedding": pad(raw_vector(t))} for i, t in enumerate(body["input"])]
        items.reverse()  # out of order on purpose: clients must sort by index
        return {"object": "list", "data": items, "model": body["model"], "usage": {"total_tokens": 1}}


@pytest.fixture()
def server():
    srv = FakeProviders()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def policy(sleeps: Sleeps, retries: int = 4) -> RetryPolicy:
    return RetryPolicy(max_retries=retries, base_s=0.5, cap_s=8.0, jitter=0.0, sleep=sleeps, rng=random.Random(0))


TEXTS = ["alpha beta", "gamma", "delta epsilon zeta", "eta", "theta iota"]


def openai(server, sleeps, **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(env={"OPENAI_API_KEY": "sk-test"}, base_url=server.url, dim=DIM,
                          retry=policy(sleeps), **{"batch_limit": 2, **kw})


def test_openai_shape_batching_order_and_auth(server):
    emb = openai(server, Sleeps())
    out = emb.encode(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), atol=1e-6)
    assert out.dtype == np.float32
    assert [len(b["input"]) for _, _, b in server.requests] == [2, 2, 1]
    path, headers, body = server.requests[0]
    assert path == "/v1/embeddings" and headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "text-embedding-3-small" and body["input"] == TEXTS[:2]
    assert emb.encode([]).shape == (0, DIM) and len(server.requests) == 3


def test_voyage_shape(server):
    emb = VoyageEmbedder(env={"VOYAGE_API_KEY": "pa-test"}, base_url=server.url, dim=DIM, batch_limit=3,
                         input_type="query", retry=policy(Sleeps()))
    np.testing.assert_allclose(emb.encode(TEXTS), expected(TEXTS), atol=1e-6)
    bodies = [b for _, _, b in server.requests]
    assert [len(b["input"]) for b in bodies] == [3, 2]
    assert bodies[0]["model"] == "voyage-code-3" and bodies[0]["input_type"] == "query"
    assert server.requests[0][0] == "/v1/embeddings" and emb.name == "voyage/voyage-code-3"


def test_cloudflare_shape(server):
    env = {"CLOUDFLARE_API_TOKEN": "cf-token", "CLOUDFLARE_ACCOUNT_ID": "acc123"}
    emb = CloudflareEmbedder(env=env, base_url=server.url, dim=DIM, batch_limit=4, retry=policy(Sleeps()))
    np.testing.assert_allclose(emb.encode(TEXTS), expected(TEXTS), atol=1e-6)
    assert [p for p, _, _ in server.requests] == ["/client/v4/accounts/acc123/ai/run/@cf/baai/bge-small-en-v1.5"] * 2
    assert [len(b["text"]) for _, _, b in server.requests] == [4, 1]
    assert server.requests[0][1]["Authorization"] == "Bearer cf-token"


def test_429_then_success_honours_retry_after(server):
    sleeps = Sleeps()
    server.script = [(429, {"Retry-After": "3"}, None)]
    out = openai(server, sleeps, batch_limit=10).encode(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), atol=1e-6)
    assert len(server.requests) == 2 and sleeps == [3.0]  # Retry-After beats the 0.5 s backoff


def test_500s_back_off_exponentially_then_succeed(server):
    sleeps = Sleeps()
    server.script = [(500, {}, None), (502, {}, None), (503, {}, None)]
    out = openai(server, sleeps, batch_limit=10).encode(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), atol=1e-6)
    assert sleeps == [0.5, 1.0, 2.0] and len(server.requests) == 4


def test_jitter_is_added_within_bounds():
    p = RetryPolicy(base_s=1.0, cap_s=4.0, jitter=0.5, rng=random.Random(1))
    for attempt in range(6):
        d = p.delay(attempt, None)
        assert min(4.0, 2.0**attempt) <= d <= min(4.0, 2.0**attempt) + 0.5


def test_persistent_500_gives_up_with_embedder_error(server):
    sleeps = Sleeps()
    server.script = [(500, {}, None)] * 3
    emb = OpenAIEmbedder(env={"OPENAI_API_KEY": "k"}, base_url=server.url, dim=DIM, retry=policy(sleeps, retries=2))
    with pytest.raises(EmbedderError, match="HTTP 500 after 3 attempts"):
        emb.encode(TEXTS)
    assert len(server.requests) == 3 and len(sleeps) == 2


def test_auth_failure_is_not_retried(server):
    sleeps = Sleeps()
    server.script = [(401, {}, b'{"error": {"message": "Incorrect API key provided"}}')]
    with pytest.raises(EmbedderError, match="HTTP 401.*Incorrect API key"):
        openai(server, sleeps).encode(TEXTS)
    assert len(server.requests) == 1 and sleeps == []


def test_malformed_bodies(server):
    server.script = [(200, {}, b"<html>gateway</html>")]
    with pytest.raises(EmbedderError, match="not JSON"):
        openai(server, Sleeps()).encode(["a"])
    server.script = [(200, {}, b'{"data": [{"index": 5, "embedding": [1, 2]}]}')]
    with pytest.raises(EmbedderError, match="index"):
        openai(server, Sleeps()).encode(["a"])
    server.script = [(200, {}, b'{"result": null, "success": false, "errors": [{"code": 5007}]}')]
    env = {"CLOUDFLARE_API_TOKEN": "t", "CLOUDFLARE_ACCOUNT_ID": "a"}
    with pytest.raises(EmbedderError, match="not successful"):
        CloudflareEmbedder(env=env, base_url=server.url, dim=DIM, retry=policy(Sleeps())).encode(["a"])


def test_wrong_dimension(server):
    server.dim = DIM + 2
    with pytest.raises(EmbedderError, match="dimension 6"):
        openai(server, Sleeps()).encode(TEXTS)


def test_timeout_then_connection_refused(server):
    server.delay_s = 0.5
    sleeps = Sleeps()
    emb = OpenAIEmbedder(env={"OPENAI_API_KEY": "k"}, base_url=server.url, dim=DIM, timeout_s=0.1,
                         retry=policy(sleeps, retries=1))
    with pytest.raises(EmbedderError, match="failed"):
        emb.encode(["a"])
    assert len(sleeps) == 1
    dead = OpenAIEmbedder(env={"OPENAI_API_KEY": "k"}, base_url="http://127.0.0.1:9", dim=DIM,
                          retry=policy(Sleeps(), retries=1))
    with pytest.raises(EmbedderError, match="failed"):
        dead.encode(["a"])


def test_missing_keys():
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY"):
        OpenAIEmbedder(env={})
    with pytest.raises(EmbedderError, match="CLOUDFLARE_ACCOUNT_ID"):
        CloudflareEmbedder(env={"CLOUDFLARE_API_TOKEN": "t"})


def test_parse_retry_after():
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after("soon") is None
