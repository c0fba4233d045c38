"""Stored bytes of the runtime_history chat (benches/runtime_history.rs) on LangGraph's own
savers: START -> chatbot -> END, a user message of 120 characters and a reply of 600 a turn,
messages as plain dicts under operator.add. Prints raw message bytes and the bytes stored
(SqliteSaver: checkpoint, metadata and writes columns; PostgresSaver when
WAYPOINT_TEST_POSTGRES_URL is set: records, blobs and writes), for the README's row beside
`cargo bench -p waypoint-benches --bench runtime_history`.

    python benches/peers/langgraph_history_bytes.py [turns, default 200]
"""
import json, operator, os, random, sqlite3, sys, tempfile
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END

WORDS = "the agent memory thread checkpoint graph state tool answer question persist resume history value user reply".split()

def text(rng, chars):
    out = ""
    while len(out) < chars:
        out += (" " if out else "") + rng.choice(WORDS)
    return out[:chars]

class Chat(TypedDict):
    messages: Annotated[list, operator.add]

def chatbot(state):
    rng = random.Random(len(state["messages"]))
    return {"messages": [{"role": "ai", "content": text(rng, 600)}]}

def run(saver, turns):
    g = StateGraph(Chat)
    g.add_node("chatbot", chatbot)
    g.add_edge(START, "chatbot"); g.add_edge("chatbot", END)
    app = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    rng = random.Random(42)
    out = None
    for _ in range(turns):
        out = app.invoke({"messages": [{"role": "user", "content": text(rng, 120)}]}, cfg)
    return sum(len(json.dumps(m, separators=(",", ":"))) for m in out["messages"])

turns = int(sys.argv[1]) if len(sys.argv) > 1 else 200
from langgraph.checkpoint.sqlite import SqliteSaver
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "lg.db")
    with SqliteSaver.from_conn_string(path) as saver:
        raw = run(saver, turns)
    c = sqlite3.connect(path)
    cp = c.execute("SELECT SUM(LENGTH(checkpoint)), SUM(LENGTH(metadata)), COUNT(*) FROM checkpoints").fetchone()
    wr = c.execute("SELECT COALESCE(SUM(LENGTH(value)),0) FROM writes").fetchone()[0]
    print(f"| langgraph sqlite | {turns} | {raw} | checkpoint+metadata {cp[0]+cp[1]} writes {wr} total {cp[0]+cp[1]+wr} ({(cp[0]+cp[1]+wr)/raw:.2f}) | {cp[2]} checkpoints |")
url = os.environ.get("WAYPOINT_TEST_POSTGRES_URL")
if url:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    schema = "lg_hist_%d" % random.randrange(1 << 30)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}")
        saver = PostgresSaver(conn); saver.setup()
        raw = run(saver, turns)
        cp = conn.execute("SELECT SUM(pg_column_size(checkpoint)) + SUM(pg_column_size(metadata)), COUNT(*) FROM checkpoints").fetchone()
        bl = conn.execute("SELECT COALESCE(SUM(LENGTH(blob)),0) FROM checkpoint_blobs").fetchone()[0]
        wr = conn.execute("SELECT COALESCE(SUM(LENGTH(blob)),0) FROM checkpoint_writes").fetchone()[0]
        total = cp[0] + bl + wr
        print(f"| langgraph postgres | {turns} | {raw} | records {cp[0]} blobs {bl} writes {wr} total {total} ({total/raw:.2f}) | {cp[1]} checkpoints |")
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
