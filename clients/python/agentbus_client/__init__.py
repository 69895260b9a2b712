"""Python client for the agentbus HTTP API (docs/API.md).

Client is synchronous, AsyncClient the same API for asyncio. Both send the
caller's identity (a tenant's API key as a bearer credential, or on an
open or service-token ingress the X-Tenant-Id and X-User-Id headers), raise
an AgentbusError subclass carrying the API's stable error code, and resume
a stream that lost its connection from the last chunk received
(GET /agent/runs/{run_id}/stream with Last-Event-ID), so a caller sees
every chunk once.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional

import httpx

__all__ = [
    "AgentbusError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "RateLimited", "Unavailable", "RunTimeout", "RunResult", "Chunk", "Client", "AsyncClient",
]


class AgentbusError(Exception):
    """An HTTP error of the API: its status, stable code and message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class BadRequest(AgentbusError):
    """400, 408 or 413: the request cannot be taken as it is."""


class Unauthorized(AgentbusError):
    """401: no credential, or one the ingress refused."""


class Forbidden(AgentbusError):
    """403: the identity sent disagrees with the credential."""


class NotFound(AgentbusError):
    """404: missing, or another tenant's."""


class Conflict(AgentbusError):
    """409 or 428: the resource's state refuses the request."""


class RateLimited(AgentbusError):
    """429: a request limit; retry_after is the seconds to wait."""

    def __init__(self, status: int, code: str, message: str, retry_after: float):
        super().__init__(status, code, message)
        self.retry_after = retry_after


class Unavailable(AgentbusError):
    """503: a dependency of the ingress is not available now."""


class RunTimeout(AgentbusError):
    """504: the run goes on past the request's time; read its plan later."""

    def __init__(self, status: int, code: str, message: str, run_id: str = "", plan_id: str = ""):
        super().__init__(status, code, message)
        self.run_id, self.plan_id = run_id, plan_id


_BY_STATUS = {400: BadRequest, 408: BadRequest, 413: BadRequest, 401: Unauthorized, 403: Forbidden,
              404: NotFound, 409: Conflict, 428: Conflict, 503: Unavailable}


def _error(resp: httpx.Response) -> AgentbusError:
    try:
        body = resp.json()
        err = body.get("error") or {}
        code, message = err.get("code", ""), err.get("message", "")
    except (ValueError, AttributeError):
        body, code, message = {}, "", resp.text[:200]
    if resp.status_code == 429:
        return RateLimited(429, code, message, float(resp.headers.get("Retry-After", "0") or 0))
    if resp.status_code == 504:
        return RunTimeout(504, code, message, body.get("run_id", ""), body.get("plan_id", ""))
    return _BY_STATUS.get(resp.status_code, AgentbusError)(resp.status_code, code, message)


@dataclass
class RunResult:
    """The answer of a run: its outcome, or, parked at a gate, the gate."""

    run_id: str
    response: str
    plan_id: str
    status: str
    terminal_code: str
    steps: List[Dict[str, Any]] = field(default_factory=list)
    detail: Any = None
    usage: Dict[str, Any] = field(default_factory=dict)

    @property
    def parked(self) -> bool:
        """The run waits at a gate (detail is its packet) rather than ended."""
        return self.terminal_code == "" and self.status != ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "RunResult":
        return cls(run_id=d.get("run_id", ""), response=d.get("response", ""), plan_id=d.get("plan_id", ""),
                   status=d.get("status", ""), terminal_code=d.get("terminal_code", ""),
                   steps=d.get("steps") or [], detail=d.get("detail"), usage=d.get("usage") or {})


@dataclass
class Chunk:
    """One chunk of a streamed run; id is its stream sequence (None for
    the chunk the ingress itself ends a stream with)."""

    message_id: str
    session_id: str
    message_type: str
    content: str
    end_of_message: bool
    end_of_dialog: bool
    id: Optional[int] = None

    def result(self) -> RunResult:
        """The run's result, from a result or error chunk."""
        try:
            return RunResult.from_json(json.loads(self.content))
        except ValueError:
            return RunResult(run_id="", response=self.content, plan_id="", status="", terminal_code="")

    def json(self) -> Any:
        """The content decoded (a progress envelope, an observation, a gate)."""
        return json.loads(self.content)


def _chunk(event_id: Optional[str], data: str) -> Chunk:
    d = json.loads(data)
    return Chunk(message_id=d.get("message_id", ""), session_id=d.get("session_id", ""),
                 message_type=d.get("message_type", ""), content=d.get("content", ""),
                 end_of_message=bool(d.get("end_of_message")), end_of_dialog=bool(d.get("end_of_dialog")),
                 id=int(event_id) if event_id else None)


class _SSE:
    """Server-sent events from lines: feed each line, get a chunk at the
    blank line that ends an event."""

    def __init__(self) -> None:
        self.id: Optional[str] = None
        self.data: List[str] = []

    def feed(self, line: str) -> Optional[Chunk]:
        if line == "":
            if not self.data:
                return None
            c = _chunk(self.id, "\n".join(self.data))
            self.id, self.data = None, []
            return c
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            self.id = value
        elif name == "data":
            self.data.append(value)
        return None


def _run_body(message: str, session_id: str, user_id: Optional[str], agent_id: Optional[str],
              budget: Optional[Dict[str, float]], tenant: Optional[str], stream: bool) -> Dict[str, Any]:
    body: Dict[str, Any] = {"message": message, "session_id": session_id, "stream": stream}
    for k, v in (("user_id", user_id), ("agent_id", agent_id), ("budget", budget), ("tenant_id", tenant)):
        if v:
            body[k] = v
    return body


def _headers(api_key: Optional[str], tenant: Optional[str], user: Optional[str]) -> Dict[str, str]:
    h = {"Accept": "application/json"}
    if api_key:
        h["Authorization"] = "Bearer " + api_key
    if tenant:
        h["X-Tenant-Id"] = tenant
    if user:
        h["X-User-Id"] = user
    return h


# A resumed stream retries a run whose plan is not readable yet (404) or a
# broken connection, waiting a little longer each time.
_RETRYABLE = (httpx.TransportError, NotFound, Unavailable)


class Client:
    """The agentbus HTTP API, synchronously.

    base_url is the ingress (http://127.0.0.1:8080). api_key is a tenant's
    key (abk_...), which names the tenant; on an open or service-token
    ingress pass tenant (and user) instead, and token for the service token.
    max_resumes bounds the reconnections of one stream.
    """

    def __init__(self, base_url: str, *, api_key: Optional[str] = None, tenant: Optional[str] = None,
                 user: Optional[str] = None, token: Optional[str] = None, timeout: float = 330.0,
                 max_resumes: int = 5, transport: Optional[httpx.BaseTransport] = None):
        self.tenant, self.max_resumes, self.resumes = tenant, max_resumes, 0
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=_headers(api_key or token, tenant, user),
                                  timeout=httpx.Timeout(timeout, connect=10.0), transport=transport)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        resp = self._http.request(method, path, **kw)
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.json() if resp.content else None

    def run(self, message: str, *, session_id: str, user_id: Optional[str] = None, agent_id: Optional[str] = None,
            budget: Optional[Dict[str, float]] = None) -> RunResult:
        """Runs a task and returns its result (or the gate it parks at)."""
        body = _run_body(message, session_id, user_id, agent_id, budget, self.tenant, False)
        return RunResult.from_json(self._call("POST", "/agent/run", json=body))

    def stream(self, message: str, *, session_id: str, user_id: Optional[str] = None,
               agent_id: Optional[str] = None, budget: Optional[Dict[str, float]] = None) -> Iterator[Chunk]:
        """Runs a task, yielding its chunks until the last (a result, an
        error or the gate it parks at), resuming a lost connection."""
        body = _run_body(message, session_id, user_id, agent_id, budget, self.tenant, True)
        return self._chunks(self._http.stream("POST", "/agent/run", json=body), None)

    def follow(self, run_id: str, *, last_event_id: Optional[int] = None) -> Iterator[Chunk]:
        """Yields a run's chunks after last_event_id until its last."""
        return self._chunks(None, run_id, last_event_id)

    def _chunks(self, first: Any, run_id: Optional[str], last: Optional[int] = None) -> Iterator[Chunk]:
        attempt = 0
        while True:
            cm = first if first is not None else self._resume(run_id or "", last)
            first = None
            try:
                with cm as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        raise _error(resp)
                    run_id = run_id or resp.headers.get("X-Run-Id", "")
                    sse = _SSE()
                    for line in resp.iter_lines():
                        c = sse.feed(line)
                        if c is None:
                            continue
                        if c.id is not None:
                            last = c.id
                        yield c
                        if c.end_of_dialog:
                            return
                return
            except _RETRYABLE:
                attempt += 1
                if not run_id or attempt > self.max_resumes:
                    raise
                self.resumes += 1
                time.sleep(min(0.2 * 2 ** attempt, 5.0))

    def _resume(self, run_id: str, last: Optional[int]) -> Any:
        headers = {"Last-Event-ID": str(last)} if last else {}
        return self._http.stream("GET", f"/agent/runs/{run_id}/stream", headers=headers)

    def gates(self, run_id: str) -> List[Dict[str, Any]]:
        """The gates the run has opened, with their decisions."""
        return self._call("GET", f"/agent/runs/{run_id}/approvals")["gates"]

    def decide(self, run_id: str, gate_id: str, decision: str = "approve", *, comment: Optional[str] = None,
               content: Any = None) -> Dict[str, Any]:
        """Approves or denies a gate (content answers a question)."""
        body: Dict[str, Any] = {"decision": decision}
        if comment:
            body["comment"] = comment
        if content is not None:
            body["content"] = content
        return self._call("POST", f"/agent/runs/{run_id}/approvals/{gate_id}", json=body)

    def cancel(self, run_id: str) -> Dict[str, Any]:
        """Cancels a run: it ends USER_CANCEL before its next hop."""
        return self._call("POST", f"/agent/runs/{run_id}/cancel")

    def plan(self, plan_id: str) -> Dict[str, Any]:
        """A run's plan as persisted: {"plan": ..., "version": n}; the
        projector writes it shortly after each hop (NotFound until then)."""
        return self._call("GET", f"/agent/plans/{plan_id}")

    def trace(self, plan_id: str) -> Dict[str, Any]:
        """A run's trace: its events in order."""
        return self._call("GET", f"/agent/plans/{plan_id}/trace")


class AsyncClient:
    """The agentbus HTTP API for asyncio: Client's methods, awaited (stream
    and follow are async iterators)."""

    def __init__(self, base_url: str, *, api_key: Optional[str] = None, tenant: Optional[str] = None,
                 user: Optional[str] = None, token: Optional[str] = None, timeout: float = 330.0,
                 max_resumes: int = 5, transport: Optional[httpx.AsyncBaseTransport] = None):
        self.tenant, self.max_resumes, self.resumes = tenant, max_resumes, 0
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=_headers(api_key or token, tenant, user),
                                       timeout=httpx.Timeout(timeout, connect=10.0), transport=transport)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        resp = await self._http.request(method, path, **kw)
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.json() if resp.content else None

    async def run(self, message: str, *, session_id: str, user_id: Optional[str] = None,
                  agent_id: Optional[str] = None, budget: Optional[Dict[str, float]] = None) -> RunResult:
        body = _run_body(message, session_id, user_id, agent_id, budget, self.tenant, False)
        return RunResult.from_json(await self._call("POST", "/agent/run", json=body))

    def stream(self, message: str, *, session_id: str, user_id: Optional[str] = None,
               agent_id: Optional[str] = None, budget: Optional[Dict[str, float]] = None) -> AsyncIterator[Chunk]:
        body = _run_body(message, session_id, user_id, agent_id, budget, self.tenant, True)
        return self._chunks(self._http.stream("POST", "/agent/run", json=body), None)

    def follow(self, run_id: str, *, last_event_id: Optional[int] = None) -> AsyncIterator[Chunk]:
        return self._chunks(None, run_id, last_event_id)

    async def _chunks(self, first: Any, run_id: Optional[str], last: Optional[int] = None) -> AsyncIterator[Chunk]:
        attempt = 0
        while True:
            cm = first if first is not None else self._resume(run_id or "", last)
            first = None
            try:
                async with cm as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        raise _error(resp)
                    run_id = run_id or resp.headers.get("X-Run-Id", "")
                    sse = _SSE()
                    async for line in resp.aiter_lines():
                        c = sse.feed(line)
                        if c is None:
                            continue
                        if c.id is not None:
                            last = c.id
                        yield c
                        if c.end_of_dialog:
                            return
                return
            except _RETRYABLE:
                attempt += 1
                if not run_id or attempt > self.max_resumes:
                    raise
                self.resumes += 1
                await asyncio.sleep(min(0.2 * 2 ** attempt, 5.0))

    def _resume(self, run_id: str, last: Optional[int]) -> Any:
        headers = {"Last-Event-ID": str(last)} if last else {}
        return self._http.stream("GET", f"/agent/runs/{run_id}/stream", headers=headers)

    async def gates(self, run_id: str) -> List[Dict[str, Any]]:
        return (await self._call("GET", f"/agent/runs/{run_id}/approvals"))["gates"]

    async def decide(self, run_id: str, gate_id: str, decision: str = "approve", *, comment: Optional[str] = None,
                     content: Any = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"decision": decision}
        if comment:
            body["comment"] = comment
        if content is not None:
            body["content"] = content
        return await self._call("POST", f"/agent/runs/{run_id}/approvals/{gate_id}", json=body)

    async def cancel(self, run_id: str) -> Dict[str, Any]:
        return await self._call("POST", f"/agent/runs/{run_id}/cancel")

    async def plan(self, plan_id: str) -> Dict[str, Any]:
        return await self._call("GET", f"/agent/plans/{plan_id}")

    async def trace(self, plan_id: str) -> Dict[str, Any]:
        return await self._call("GET", f"/agent/plans/{plan_id}/trace")

