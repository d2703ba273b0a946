"""Provider embedders over HTTP (httpx): OpenAI, Voyage AI, Cloudflare Workers AI.

Each adapter speaks its provider's documented JSON, reads its key from the environment,
splits inputs into batches of the provider's per-request limit, and retries 429 / 5xx /
transport errors with exponential backoff:

    delay(attempt) = max(Retry-After, min(cap, base * 2**attempt) + U(0, jitter * base))

Other 4xx answers and malformed bodies raise EmbedderError at once. Rows are put back in
input order (by the response's ``index``) and L2-normalised.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings; ``sleep`` and ``rng`` are injectable so tests do not wait."""

    max_retries: int = 4
    base_s: float = 0.5
    cap_s: float = 20.0
    jitter: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.cap_s, self.base_s * 2**attempt) + self.rng.uniform(0, self.jitter * self.base_s)
        return max(backoff, retry_after) if retry_after is not None else backoff


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date; None if absent/invalid."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HTTPEmbedder:
    """Shared transport: batching, retries, error mapping. Subclasses build and parse bodies."""

    name: str
    dim: int
    batch_limit: int
    provider: str

    def __init__(self, *, timeout_s: float, retry: RetryPolicy | None, client: httpx.Client | None) -> None:
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self._client = client or httpx.Client(timeout=timeout_s)
        self.requests_sent = 0

    # -- subclass hooks ---------------------------------------------------------------
    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, batch: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _rows(self, payload: Any, n: int) -> list[list[float]]:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed in provider-sized batches; float32 (n, dim) with unit rows."""
        texts = list(texts)
        if not texts:
            return empty(self.dim)
        parts = []
        for start in range(0, len(texts), self.batch_limit):
            batch = texts[start : start + self.batch_limit]
            rows = self._rows(self._post(self._body(batch)), len(batch))
            try:
                matrix = np.asarray(rows, dtype=np.float32)
            except (ValueError, TypeError) as exc:  # ragged rows or non-numbers
                raise EmbedderError(f"{self.provider}: embeddings are not a numeric matrix: {exc}") from exc
            if matrix.shape != (len(batch), self.dim):
                raise EmbedderError(
                    f"{self.provider}: expected {len(batch)} embeddings of dimension {self.dim}, got shape {matrix.shape}"
                )
            parts.append(matrix)
        return l2_normalise(np.vstack(parts), self.dim)

    def _post(self, body: dict[str, Any]) -> Any:
        url = self._url()
        for attempt in range(self.retry.max_retries + 1):
            last = attempt == self.retry.max_retries
            self.requests_sent += 1
            try:
                resp = self._client.post(url, json=body, headers=self._headers(), timeout=self.timeout_s)
            except httpx.TransportError as exc:  # timeouts, refused connections, resets
                if last:
                    raise EmbedderError(f"{self.provider}: request to {url} failed: {exc}") from exc
                self.retry.sleep(self.retry.delay(attempt, None))
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                if last:
                    raise EmbedderError(
                        f"{self.provider}: HTTP {resp.status_code} after {attempt + 1} attempts: {resp.text[:200]}"
                    )
                self.retry.sleep(self.retry.delay(attempt, parse_retry_after(resp.headers.get("retry-after"))))
                continue
            if resp.status_code >= 400:
                raise EmbedderError(f"{self.provider}: HTTP {resp.status_code} from {url}: {resp.text[:200]}")
            try:
                return resp.json()
            except ValueError as exc:
                raise EmbedderError(f"{self.provider}: response body is not JSON: {resp.text[:200]!r}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._client.close()


def _require(env: Mapping[str, str], var: str, provider: str) -> str:
    value = env.get(var, "").strip()
    if not value:
        raise EmbedderError(f"{provider}: environment variable {var} is not set")
    return value


def _indexed_rows(payload: Any, n: int, provider: str) -> list[list[float]]:
    """``{"data": [{"index": i, "embedding": [...]}, ...]}`` -> rows ordered by index."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise EmbedderError(f"{provider}: response has no 'data' list")
    rows: list[Any] = [None] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict):
            raise EmbedderError(f"{provider}: data[{pos}] is not an object")
        idx, emb = item.get("index"), item.get("embedding")
        if not isinstance(idx, int) or not 0 <= idx < n or rows[idx] is not None:
            raise EmbedderError(f"{provider}: data[{pos}].index is missing, out of range or repeated: {idx!r}")
        if not isinstance(emb, list):
            raise EmbedderError(f"{provider}: data[{pos}].embedding is not a list")
        rows[idx] = emb
    if any(r is None for r in rows):
        raise EmbedderError(f"{provider}: expected {n} embeddings, got {len(data)}")
    return rows


class OpenAIEmbedder(HTTPEmbedder):
    """``POST {base}/v1/embeddings`` {"model", "input": [...]}; key OPENAI_API_KEY; 2048 inputs per request."""

    provider = "openai"
    DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        base_url: str = "https://api.openai.com",
        dim: int | None = None,
        batch_limit: int = 2048,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        import os

        self.api_key = api_key or _require(env if env is not None else os.environ, "OPENAI_API_KEY", self.provider)
        self.model, self.base_url, self.batch_limit = model, base_url.rstrip("/"), batch_limit
        self.dim = dim or self.DIMS.get(model, 1536)
        self.name = f"openai/{model}" + (f"@{dim}" if dim else "")
        self._send_dims = dim is not None
        super().__init__(timeout_s=timeout_s, retry=retry, client=client)

    def _url(self) -> str:
        return f"{self.base_url}/v1/embeddings"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dims:
            body["dimensions"] = self.dim
        return body

    def _rows(self, payload: Any, n: int) -> list[list[float]]:
        return _indexed_rows(payload, n, self.provider)


class VoyageEmbedder(HTTPEmbedder):
    """``POST {base}/v1/embeddings`` {"model", "input", "input_type"}; key VOYAGE_API_KEY; 128 inputs per request."""

    provider = "voyage"

    def __init__(
        self,
        model: str = "voyage-code-3",
        *,
        input_type: str | None = "document",
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        base_url: str = "https://api.voyageai.com",
        dim: int = 1024,
        batch_limit: int = 128,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        import os

        self.api_key = api_key or _require(env if env is not None else os.environ, "VOYAGE_API_KEY", self.provider)
        self.model, self.input_type, self.base_url = model, input_type, base_url.rstrip("/")
        self.dim, self.batch_limit = dim, batch_limit
        self.name = f"voyage/{model}"
        super().__init__(timeout_s=timeout_s, retry=retry, client=client)

    def _url(self) -> str:
        return f"{self.base_url}/v1/embeddings"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _body(self, batch: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": batch, "input_type": self.input_type}

    def _rows(self, payload: Any, n: int) -> list[list[float]]:
        return _indexed_rows(payload, n, self.provider)


class CloudflareEmbedder(HTTPEmbedder):
    """``POST {base}/client/v4/accounts/{account}/ai/run/{model}`` {"text": [...]} ->
    {"result": {"shape": [n, d], "data": [[...]]}, "success": true}; 100 texts per request."""

    provider = "cloudflare"

    def __init__(
        self,
        model: str = "@cf/baai/bge-small-en-v1.5",
        *,
        api_token: str | None = None,
        account_id: str | None = None,
        env: Mapping[str, str] | None = None,
        base_url: str = "https://api.cloudflare.com",
        dim: int = 384,
        batch_limit: int = 100,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        import os

        source = env if env is not None else os.environ
        self.api_token = api_token or _require(source, "CLOUDFLARE_API_TOKEN", self.provider)
        self.account_id = account_id or _require(source, "CLOUDFLARE_ACCOUNT_ID", self.provider)
        self.model, self.base_url, self.dim, self.batch_limit = model, base_url.rstrip("/"), dim, batch_limit
        self.name = f"cloudflare/{model}"
        super().__init__(timeout_s=timeout_s, retry=retry, client=client)

    def _url(self) -> str:
        return f"{self.base_url}/client/v4/accounts/{self.account_id}/ai/run/{self.model}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_token}"}

    def _body(self, batch: list[str]) -> dict[str, Any]:
        return {"text": batch}

    def _rows(self, payload: Any, n: int) -> list[list[float]]:
        if not isinstance(payload, dict) or payload.get("success") is not True:
            errors = payload.get("errors") if isinstance(payload, dict) else None
            raise EmbedderError(f"{self.provider}: request was not successful: {errors!r}")
        result = payload.get("result")
        data = result.get("data") if isinstance(result, dict) else None
        if not isinstance(data, list) or not all(isinstance(r, list) for r in data):
            raise EmbedderError(f"{self.provider}: response has no result.data list of rows")
        shape = result.get("shape")
        if shape is not None and list(shape) != [len(data), len(data[0]) if data else 0]:
            raise EmbedderError(f"{self.provider}: result.shape {shape} disagrees with result.data")
        if len(data) != n:
            raise EmbedderError(f"{self.provider}: expected {n} embeddings, got {len(data)}")
        return data
