"""Drives agentbus's A2A endpoints with the official a2a-sdk, unmodified.

    python a2a_sdk_check.py <base_url> <gated_base_url> <tenant> <task>

On the stack at base_url: fetches the default agent's card (at /a2a and
at the root), sends the task and waits for its task, streams the task to
its end and reads it with tasks/get. On the stack at gated_base_url
(whose tool calls wait at an approval gate): streams the task to
input-required, answers the gate with a reply to the task ("approve") and
streams it to its end; sends the task again, which waits at the gate, and
cancels it, then cancels it again (TaskNotCancelable); asks for a missing
task and for another tenant's (TaskNotFound).

Prints one JSON object; cmd/agentbus/a2a_test.go runs it and checks it.
"""
import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import (A2ACardResolver, ClientConfig,
                        ClientFactory, create_text_message_object)
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (Message, Part, Role, TaskIdParams, TaskQueryParams,
                       TaskStatusUpdateEvent, TextPart)
from a2a.utils import get_artifact_text, get_message_text


def text_of_artifacts(task):
    return "".join(get_artifact_text(a, delimiter="") for a in (task.artifacts or []))


def status_text(task):
    m = task.status.message
    return get_message_text(m) if m else ""


async def collect(client, message):
    """Sends message, returning the last task and what the events said."""
    task, kinds, progress = None, [], []
    final = False
    async for event in client.send_message(message):
        task, update = event
        kinds.append(update.kind if update else "task")
        if isinstance(update, TaskStatusUpdateEvent):
            final = update.final
            if update.status.state.value == "working" and update.status.message:
                progress.append(get_message_text(update.status.message))
    return task, {"kinds": kinds, "progress": "\n".join(progress), "final": final,
                  "state": task.status.state.value, "answer": text_of_artifacts(task),
                  "message": status_text(task)}


async def rpc_error(call):
    try:
        await call
    except A2AClientJSONRPCError as e:
        return {"code": e.error.code, "message": e.error.message}
    return None


async def main():
    base, gated_base, tenant, task_text = sys.argv[1:5]
    out = {}
    async with httpx.AsyncClient(headers={"X-Tenant-Id": tenant}, timeout=120) as http:
        card = await A2ACardResolver(http, base + "/a2a").get_agent_card()
        root = await A2ACardResolver(http, base).get_agent_card()
        out["card"] = {"name": card.name, "url": card.url, "streaming": card.capabilities.streaming,
                       "root_url": root.url, "schemes": sorted((card.security_schemes or {}).keys()),
                       "protocol": card.protocol_version}

        blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        sent, _ = await collect(blocking, create_text_message_object(content=task_text))
        out["send"] = {"state": sent.status.state.value, "answer": text_of_artifacts(sent),
                       "id": sent.id, "context": sent.context_id}

        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        streamed, out["stream"] = await collect(streaming, create_text_message_object(content=task_text))
        got = await blocking.get_task(TaskQueryParams(id=streamed.id))
        out["get"] = {"id": got.id, "context": got.context_id, "state": got.status.state.value}

        gated_card = await A2ACardResolver(http, gated_base + "/a2a").get_agent_card()
        gated = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(gated_card)
        parked, out["gate"] = await collect(gated, create_text_message_object(content=task_text))
        reply = Message(role=Role.user, message_id=str(uuid.uuid4()), task_id=parked.id,
                        context_id=parked.context_id, parts=[Part(root=TextPart(text="approve: a read of the outlets"))])
        resumed, out["resumed"] = await collect(gated, reply)
        out["resumed"]["same_task"] = resumed.id == parked.id

        gated_blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(gated_card)
        other, _ = await collect(gated_blocking, create_text_message_object(content=task_text))
        cancelled = await gated_blocking.cancel_task(TaskIdParams(id=other.id))
        out["cancel"] = {"before": other.status.state.value, "state": cancelled.status.state.value,
                         "again": await rpc_error(gated_blocking.cancel_task(TaskIdParams(id=other.id)))}
        out["missing"] = await rpc_error(blocking.get_task(TaskQueryParams(id=str(uuid.uuid4()))))

    async with httpx.AsyncClient(headers={"X-Tenant-Id": "another-tenant"}, timeout=60) as http:
        stranger = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        out["other_tenant"] = await rpc_error(stranger.get_task(TaskQueryParams(id=sent.id)))
    print(json.dumps(out))


asyncio.run(main())
