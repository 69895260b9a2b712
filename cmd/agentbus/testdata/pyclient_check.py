"""Drives agentbus's Python client (clients/python) against an all-in-one.

    python pyclient_check.py <base_url> <gated_base_url> <task>

gated_base_url is an all-in-one whose outlet_list is a network call (so
its runs park at a gate by default). Prints one JSON object of what the
client saw; cmd/agentbus/pyclient_test.go checks it.
"""
import asyncio
import json
import sys
import time

import httpx

from agentbus_client import AsyncClient, BadRequest, Client, NotFound

base, gated_base, task = sys.argv[1:4]
out = {}


class CutOnce(httpx.HTTPTransport):
    """Breaks the first streamed answer after `after` bytes, as a lost
    connection would: the client must resume it."""

    def __init__(self, after):
        super().__init__()
        self.after, self.cut = after, False

    def handle_request(self, request):
        resp = super().handle_request(request)
        if self.cut or request.method != "POST" or not json.loads(request.content or b"{}").get("stream"):
            return resp
        self.cut = True
        inner, limit = resp.stream, self.after

        class Broken(httpx.SyncByteStream):
            def __iter__(self):
                sent = 0
                for part in inner:
                    if sent + len(part) > limit:
                        yield part[: limit - sent]
                        raise httpx.ReadError("connection cut by the test")
                    sent += len(part)
                    yield part

            def close(self):
                inner.close()

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Broken(), request=request)


with Client(base, tenant="demo", user="py") as ab:
    res = ab.run(task, session_id="py-sync")
    out["sync"] = {"code": res.terminal_code, "response": res.response, "plan_id": res.plan_id}
    # The plan is a projection the projector writes in batches: it is
    # readable shortly after the run ends.
    for _ in range(100):
        try:
            out["plan_status"] = ab.plan(res.plan_id)["plan"]["status"]
            if out["plan_status"] == "complete":
                break
        except NotFound:
            pass
        time.sleep(0.05)
    try:
        ab.run("   ", session_id="py-bad")
    except BadRequest as e:
        out["bad"] = {"status": e.status, "code": e.code}
    try:
        ab.plan("plan-missing")
    except NotFound as e:
        out["missing"] = {"status": e.status, "code": e.code}

with Client(base, tenant="demo", user="py", transport=CutOnce(1200)) as ab:
    chunks, ids, answer, last = 0, [], "", None
    for c in ab.stream(task, session_id="py-stream"):
        chunks += 1
        if c.id is not None:
            ids.append(c.id)
        if c.message_type == "answer":
            answer += c.content
        last = c
    out["stream"] = {"resumes": ab.resumes, "chunks": chunks, "ids_sorted": ids == sorted(ids),
                     "ids_unique": len(ids) == len(set(ids)), "answer": answer, "last": last.message_type,
                     "code": last.result().terminal_code}


async def run_async():
    async with AsyncClient(base, tenant="demo", user="py") as ab:
        res = await ab.run(task, session_id="py-async")
        n = 0
        async for c in ab.stream(task, session_id="py-async-stream"):
            n += 1
            final = c
        return {"code": res.terminal_code, "stream_chunks": n, "stream_code": final.result().terminal_code}

out["async"] = asyncio.run(run_async())

with Client(gated_base, tenant="demo", user="py") as ab:
    parked = ab.run(task, session_id="py-gated")
    gates = ab.gates(parked.run_id)
    decided = ab.decide(parked.run_id, gates[0]["gate_id"], "approve", comment="ok from python")
    final = None
    for c in ab.follow(parked.run_id):
        final = c
    out["gated"] = {"parked": parked.parked, "status": parked.status, "gates": len(gates), "decision": decided.get("decision"),
                    "final": final.message_type, "code": final.result().terminal_code}

print(json.dumps(out))
