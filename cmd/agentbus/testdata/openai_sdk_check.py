"""Drives agentbus's /v1/chat/completions with the official openai SDK,
unmodified: a completion and a streamed completion of one task.

    python openai_sdk_check.py <base_url> <tenant> <task>

Prints one JSON object: the completion's answer, finish reason and run,
and the stream's answer, finish reason, chunk count, progress lines and
usage. cmd/agentbus/openai_test.go runs it and checks what it prints.
"""
import json
import sys

import openai

base_url, tenant, task = sys.argv[1:4]
client = openai.OpenAI(base_url=base_url, api_key="unused-in-open-mode",
                       default_headers={"X-Tenant-Id": tenant}, max_retries=0)

done = client.chat.completions.create(
    model="agentbus", messages=[{"role": "user", "content": task}])

answer, reasoning, finish, chunks, usage = "", "", None, 0, None
stream = client.chat.completions.create(
    model="agentbus", messages=[{"role": "user", "content": task}],
    stream=True, stream_options={"include_usage": True})
for chunk in stream:
    chunks += 1
    if chunk.usage is not None:
        usage = chunk.usage.model_dump()
    for choice in chunk.choices:
        answer += choice.delta.content or ""
        reasoning += getattr(choice.delta, "reasoning_content", None) or ""
        finish = choice.finish_reason or finish

try:
    client.chat.completions.create(
        model="agentbus", messages=[{"role": "assistant", "content": "hello"}])
    refused = None
except openai.BadRequestError as e:
    refused = {"status": e.status_code, "code": e.code}

print(json.dumps({
    "completion": {"answer": done.choices[0].message.content,
                   "finish_reason": done.choices[0].finish_reason,
                   "run": (done.model_extra or {}).get("agentbus")},
    "stream": {"answer": answer, "finish_reason": finish, "chunks": chunks,
               "progress": reasoning, "usage": usage},
    "refused": refused,
}))
