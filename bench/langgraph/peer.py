#!/usr/bin/env python3
"""LangGraph peer for the agentbus side-by-side benchmark.

Runs "the same 5-step plan" as agentbus's benchmark, in LangGraph, against a
fake LLM with a fixed latency, and prints ONE JSON object on stdout.

Graph (StateGraph):

    START -> planner -> executor --(step < 5)--> executor
                           |
                           +--(step == 5)--> synthesize -> END

  planner     1 model call  -> plan of 5 steps
  executor    2 model calls per step: "decide tool call", then in-process fake
              skill (no sleep, returns JSON with 8 outlet ids/scores), then
              "write step output"
  synthesize  1 model call  -> final answer

  => 1 + 5*2 + 1 = 12 model calls per run. The count is measured (every fake
  LLM call increments state["model_calls"]) and reported as
  "model_calls_per_run"; a run whose count differs is counted as an error.

Concurrency model: asyncio, one event loop, the async graph API (ainvoke) with
async nodes; the fake LLM awaits asyncio.sleep(L). This is the concurrency
model LangGraph supports for many in-flight runs in one process: the compiled
graph is shared and each run is isolated by its own thread_id. Checkpointers:
  memory -> langgraph.checkpoint.memory.InMemorySaver (its async methods are
            used by ainvoke)
  sqlite -> langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver on a file in a
            fresh temp dir (on disk; WAL mode, committed per checkpoint). One
            saver / aiosqlite connection is shared by all runs, which is how
            the saver is meant to be used; it serialises DB access internally.
(The sync SqliteSaver + thread pool alternative is avoided: CPU-bound graph work
would contend on the GIL anyway and the sync saver also serialises on one lock.)

Closed-loop load: N workers each start a new run as soon as their previous one
finishes, until M runs (--runs) have started and runs have been started for at
least --min-seconds, whichever ends later; the runs in flight then finish. Per-run latency = wall time of one ainvoke.
runs_per_s = M / wall time of the measured phase. Percentiles use nearest-rank
(with few runs p99 is the max). Warm-up runs (same concurrency) are excluded.

Exit status: 0 when the JSON was printed (check "errors"), 2 on bad usage,
3 with a "langgraph-unavailable:" line on stderr if LangGraph can't be imported.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import operator
import os
import shutil
import sys
import tempfile
import time
import uuid
import zlib
from typing import Annotated, Any, TypedDict

# Never let a benchmark run phone home to LangSmith.
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

try:
    import importlib.metadata as _md

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    LANGGRAPH_VERSION = _md.version("langgraph")
except Exception as e:  # pragma: no cover - environment problem
    print(
        f"langgraph-unavailable: cannot import langgraph with {sys.executable}: "
        f"{type(e).__name__}: {e} (run bench/langgraph/setup.sh and use bench/.venv/bin/python)",
        file=sys.stderr,
    )
    sys.exit(3)

PLAN_STEPS = 5
N_OUTLETS = 8


# ---------------------------------------------------------------- state ----
class PlanState(TypedDict):
    task: str
    plan: list[str]
    step: int  # index of the next step to execute
    outputs: Annotated[list[dict], operator.add]  # one entry per executed step
    model_calls: Annotated[int, operator.add]  # fake LLM calls made so far
    answer: str


# ------------------------------------------------------------ fakes --------
class FakeLLM:
    """Model stand-in: waits `latency_s`, returns a canned response.

    With latency 0 it returns immediately (no await at all).
    """

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    async def __call__(self, kind: str, **ctx: Any) -> dict:
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        if kind == "plan":
            return {
                "steps": [
                    f"step {i + 1}: rank outlets for '{ctx['task']}' angle {i + 1}"
                    for i in range(PLAN_STEPS)
                ]
            }
        if kind == "decide":
            return {
                "tool": "rank_outlets",
                "args": {"query": ctx["step_text"], "limit": N_OUTLETS},
            }
        if kind == "step_output":
            top = sorted(ctx["tool_result"], key=lambda o: -o["score"])[:3]
            return {"summary": f"done: {ctx['step_text']}", "top": [o["id"] for o in top]}
        if kind == "synthesize":
            return {"answer": f"{ctx['task']}: " + "; ".join(o["summary"] for o in ctx["outputs"])}
        raise ValueError(kind)


def rank_outlets(query: str, limit: int) -> str:
    """In-process fake skill: deterministic list of outlet ids/scores as JSON."""
    seed = zlib.crc32(query.encode())
    out = []
    for i in range(limit):
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        out.append({"id": f"outlet-{seed % 10000:04d}", "score": round((seed % 1000) / 1000, 3)})
    return json.dumps(out)


# ------------------------------------------------------------- graph -------
def build_graph(llm: FakeLLM) -> StateGraph:
    async def planner(state: PlanState) -> dict:
        resp = await llm("plan", task=state["task"])
        return {"plan": resp["steps"], "step": 0, "model_calls": 1}

    async def executor(state: PlanState) -> dict:
        i = state["step"]
        step_text = state["plan"][i]
        call = await llm("decide", step_text=step_text)
        tool_result = json.loads(rank_outlets(**call["args"]))
        out = await llm("step_output", step_text=step_text, tool_result=tool_result)
        out["step"] = i
        return {"outputs": [out], "step": i + 1, "model_calls": 2}

    def route(state: PlanState) -> str:
        return "executor" if state["step"] < len(state["plan"]) else "synthesize"

    async def synthesize(state: PlanState) -> dict:
        resp = await llm("synthesize", task=state["task"], outputs=state["outputs"])
        return {"answer": resp["answer"], "model_calls": 1}

    g = StateGraph(PlanState)
    g.add_node("planner", planner)
    g.add_node("executor", executor)
    g.add_node("synthesize", synthesize)
    g.add_edge(START, "planner")
    g.add_edge("planner", "executor")
    g.add_conditional_edges("executor", route, {"executor": "executor", "synthesize": "synthesize"})
    g.add_edge("synthesize", END)
    return g


# ------------------------------------------------------------ driver -------
def percentile(sorted_vals: list[float], p: float) -> float:
    if not sorted_vals:
        return 0.0
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


async def run_batch(graph, count: int, concurrency: int, durability: str, prefix: str,
                    min_seconds: float = 0.0):
    """Closed loop: `concurrency` workers start runs until at least `count` have
    started and runs have been started for at least `min_seconds`, whichever
    ends later; the runs in flight then finish."""
    latencies: list[float] = []
    calls_seen: set[int] = set()
    errors: list[str] = []
    next_idx = 0

    async def one(idx: int) -> None:
        cfg = {"configurable": {"thread_id": f"{prefix}-{idx}"}}
        t0 = time.perf_counter()
        try:
            res = await graph.ainvoke(
                {"task": f"find outlets for pitch #{idx}", "plan": [], "step": 0,
                 "outputs": [], "model_calls": 0, "answer": ""},
                cfg,
                durability=durability,
            )
        except Exception as e:  # counted, not fatal
            errors.append(f"{type(e).__name__}: {e}")
            return
        dt = time.perf_counter() - t0
        if len(res["outputs"]) != PLAN_STEPS or not res["answer"]:
            errors.append(f"run {idx}: incomplete result ({len(res['outputs'])} step outputs)")
            return
        calls_seen.add(res["model_calls"])
        latencies.append(dt)

    t0 = time.perf_counter()

    async def worker() -> None:
        nonlocal next_idx
        while next_idx < count or time.perf_counter() - t0 < min_seconds:
            idx = next_idx
            next_idx += 1
            await one(idx)

    workers = concurrency if min_seconds > 0 else min(concurrency, count)
    await asyncio.gather(*(worker() for _ in range(workers)))
    wall = time.perf_counter() - t0
    return latencies, calls_seen, errors, wall


async def main_async(args) -> dict:
    llm = FakeLLM(args.latency_ms / 1000.0)
    builder = build_graph(llm)
    tmpdir = None
    saver_cm = None
    if args.checkpointer == "memory":
        saver = InMemorySaver()
    else:
        try:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        except Exception as e:
            print(f"langgraph-unavailable: cannot import AsyncSqliteSaver: {type(e).__name__}: {e}",
                  file=sys.stderr)
            sys.exit(3)
        tmpdir = tempfile.mkdtemp(prefix="agentbus-lg-", dir=args.db_dir)
        saver_cm = AsyncSqliteSaver.from_conn_string(os.path.join(tmpdir, "checkpoints.sqlite"))
        saver = await saver_cm.__aenter__()
        await saver.setup()
    try:
        graph = builder.compile(checkpointer=saver)
        run_id = uuid.uuid4().hex[:8]
        if args.warmup > 0:
            _, _, werr, _ = await run_batch(graph, args.warmup, args.concurrency, args.durability,
                                            f"warm-{run_id}")
            if werr:
                print(f"peer.py: warm-up error: {werr[0]}", file=sys.stderr)
        lat, calls_seen, errors, wall = await run_batch(
            graph, args.runs, args.concurrency, args.durability, f"run-{run_id}", args.min_seconds)

        # Checkpoints persisted by one run (for comparing durable writes per run).
        ckpts = 0
        async for _ in saver.alist({"configurable": {"thread_id": f"run-{run_id}-0"}}):
            ckpts += 1
    finally:
        if saver_cm is not None:
            await saver_cm.__aexit__(None, None, None)
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)

    expected_calls = 1 + PLAN_STEPS * 2 + 1
    model_calls = expected_calls
    if calls_seen:
        if len(calls_seen) > 1 or expected_calls not in calls_seen:
            errors.append(f"model call count mismatch: saw {sorted(calls_seen)}, expected {expected_calls}")
        model_calls = max(calls_seen)
    if errors:
        print(f"peer.py: {len(errors)} error(s); first: {errors[0]}", file=sys.stderr)

    s = sorted(x * 1000.0 for x in lat)
    return {
        "peer": "langgraph",
        "version": LANGGRAPH_VERSION,
        "checkpointer": args.checkpointer,
        "concurrency": args.concurrency,
        "runs": len(lat) + len(errors),
        "latency_ms": args.latency_ms,
        "model_calls_per_run": model_calls,
        "runs_per_s": round(len(lat) / wall, 3) if wall > 0 else 0.0,
        "p50_ms": round(percentile(s, 50), 3),
        "p99_ms": round(percentile(s, 99), 3),
        "mean_ms": round(sum(s) / len(s), 3) if s else 0.0,
        "errors": len(errors),
        # extras (not part of the common peer schema)
        "durability": args.durability,
        "warmup": args.warmup,
        "plan_steps": PLAN_STEPS,
        "checkpoints_per_run": ckpts,
        "wall_s": round(wall, 3),
        "python": sys.version.split()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--checkpointer", choices=["memory", "sqlite"], default="memory")
    ap.add_argument("--concurrency", type=int, default=1, help="runs in flight at once")
    ap.add_argument("--runs", type=int, default=100, help="measured runs (at least)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep starting runs for at least this long, even past --runs")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="fake LLM latency per model call (0 = return immediately)")
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured runs first")
    ap.add_argument("--durability", choices=["async", "sync", "exit"], default="async",
                    help="LangGraph checkpoint durability mode (async is LangGraph's default; "
                         "sync = each step's checkpoint is persisted before the next step starts)")
    ap.add_argument("--db-dir", default=None,
                    help="parent dir for the sqlite temp dir (default: system temp dir)")
    args = ap.parse_args()
    if args.concurrency < 1 or args.runs < 1 or args.warmup < 0 or args.latency_ms < 0 or args.min_seconds < 0:
        ap.error("need --concurrency >= 1, --runs >= 1, --warmup >= 0, --latency-ms >= 0, --min-seconds >= 0")
    if args.latency_ms == int(args.latency_ms):
        args.latency_ms = int(args.latency_ms)
    out = asyncio.run(main_async(args))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
