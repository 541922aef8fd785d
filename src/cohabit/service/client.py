"""HTTP client of the service (httpx), and where its URL and token come from.

Precedence: command-line flags, then ``COHABIT_URL`` / ``COHABIT_TOKEN`` (or
``COHABIT_TOKEN_FILE``), then the config file (``$XDG_CONFIG_HOME/cohabit/client.yaml``, keys
``url``, ``token`` or ``token_file``), then the defaults: ``http://127.0.0.1:8470`` and the
admin token file of the default state dir (the single-user case).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from .daemon import DEFAULT_PORT, TOKEN_FILE, default_state_dir


class ClientError(Exception):
    """A request that failed: the message is for the user (no traceback)."""

    def __init__(self, message: str, status: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cohabit" / "client.yaml"


def _read_token(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ClientError(f"cannot read token file {path}: {exc.strerror}") from None


def resolve(url: str | None, token: str | None) -> tuple[str, str | None]:
    """The server URL and token to use (see the module docstring)."""
    cfg: dict[str, Any] = {}
    p = config_path()
    if p.is_file():
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ClientError(f"{p}: not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ClientError(f"{p}: expected a mapping with keys url, token or token_file")
        cfg = loaded or {}
    url = url or os.environ.get("COHABIT_URL") or cfg.get("url") or f"http://127.0.0.1:{DEFAULT_PORT}"
    if token is None:
        token = os.environ.get("COHABIT_TOKEN") or None
    if token is None and os.environ.get("COHABIT_TOKEN_FILE"):
        token = _read_token(Path(os.environ["COHABIT_TOKEN_FILE"]))
    if token is None:
        token = cfg.get("token")
    if token is None and cfg.get("token_file"):
        token = _read_token(Path(str(cfg["token_file"])).expanduser())
    if token is None:
        default = default_state_dir() / TOKEN_FILE
        if default.is_file():
            token = _read_token(default)
    return str(url).rstrip("/"), token


@dataclass
class Client:
    url: str
    token: str | None
    timeout: float = 30.0

    def _http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout)

    def request(self, method: str, path: str, **kw: Any) -> Any:
        try:
            with self._http() as h:
                r = h.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach the cohabit service at {self.url}: {exc} "
                              f"(is `cohabit serve` running? set --url or COHABIT_URL)") from None
        return _answer(r)

    def stream(self, path: str, **params: Any) -> Iterator[str]:
        try:
            with self._http() as h, h.stream("GET", path, params=params, timeout=None) as r:
                if r.status_code >= 400:
                    r.read()
                    _answer(r)
                yield from r.iter_text()
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach the cohabit service at {self.url}: {exc}") from None


def _answer(r: httpx.Response) -> Any:
    try:
        body = r.json()
    except ValueError:
        body = r.text
    if r.status_code >= 400:
        detail = body.get("detail") if isinstance(body, dict) else body
        raise ClientError(_describe(r.status_code, detail), r.status_code, detail)
    return body


def _describe(status: int, detail: Any) -> str:
    if isinstance(detail, list):
        lines = []
        for d in detail:
            if isinstance(d, dict):
                lines.append(d.get("text") or ": ".join(str(x) for x in (d.get("field") or d.get("loc"), d.get("msg"))
                                                        if x))
            else:
                lines.append(str(d))
        detail = "\n".join(lines)
    return f"HTTP {status}: {detail}"
