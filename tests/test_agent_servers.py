"""The scripted model servers of the real-agent tests, spoken to over HTTP as the agents
do: the streamed events and their order, the scripted turns, compaction requests,
held replies and the records. Needs no agent, so it runs where node is missing too."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from agent_servers import (
    AnthropicServer,
    Fail,
    Hold,
    ResponsesServer,
    ScriptedServer,
    Text,
    ToolCall,
)


def post(server: ScriptedServer, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST `body`; the Server-Sent Events of the answer, as (event, data) dicts."""
    req = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"] == "text/event-stream"
        text = resp.read().decode()
    events = []
    for chunk in text.split("\n\n"):
        if chunk.strip():
            head, data = chunk.split("\n", 1)
            assert head.startswith("event: ") and data.startswith("data: ")
            events.append({"event": head[7:], "data": json.loads(data[6:])})
    return events


TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}]


def test_anthropic_turns_are_streamed_as_scripted() -> None:
    with AnthropicServer() as server:
        server.script(ToolCall("Write", {"file_path": "/x/a.md", "content": "hi\n"}), Text("Ok."))
        body = {"model": "m", "stream": True, "tools": TOOLS, "messages": [
            {"role": "user", "content": "write a"}]}  # fmt: skip
        first = post(server, "/v1/messages?beta=true", body)
        second = post(server, "/v1/messages", body)
        third = post(server, "/v1/messages", body)  # the script is used up: "Done."
    names = [e["event"] for e in first]
    assert names == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    block = first[1]["data"]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Write"
    delta = first[2]["data"]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == {"file_path": "/x/a.md", "content": "hi\n"}
    assert first[4]["data"]["delta"]["stop_reason"] == "tool_use"
    assert first[0]["data"]["message"]["usage"]["input_tokens"] == 1000
    assert second[2]["data"]["delta"] == {"type": "text_delta", "text": "Ok."}
    assert second[4]["data"]["delta"]["stop_reason"] == "end_turn"
    assert third[2]["data"]["delta"]["text"] == "Done."
    assert [r.kind for r in server.requests] == ["turn", "turn", "turn"]
    assert server.requests[0].body == body and server.requests[0].path == "/v1/messages"
    assert "write a" in server.requests[0].text


def test_anthropic_compaction_and_side_requests_keep_the_script() -> None:
    with AnthropicServer() as server:
        server.script(Text("the turn"))
        compact = {"tools": TOOLS, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Your task is to create a detailed summary of the "
                                     "conversation so far ..."}]}]}  # fmt: skip
        summary = post(server, "/v1/messages", compact)
        side = post(server, "/v1/messages", {"messages": [{"role": "user", "content": "x"}]})
        turn = post(server, "/v1/messages", {"tools": TOOLS, "messages": []})
    assert "<summary>" in summary[2]["data"]["delta"]["text"]
    assert side[2]["data"]["delta"]["text"] == "Done."
    assert turn[2]["data"]["delta"]["text"] == "the turn"
    assert [r.kind for r in server.requests] == ["compact", "extra", "turn"]


def test_responses_function_and_custom_tool_calls() -> None:
    with ResponsesServer() as server:
        server.script(
            ToolCall("exec_command", {"cmd": "ls"}),
            ToolCall("apply_patch", "*** Begin Patch\n*** End Patch\n"),
            Text("Done here.", input_tokens=6000),
        )
        body = {"model": "gpt", "stream": True, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
        ]}  # fmt: skip
        answers = [post(server, "/v1/responses", body) for _ in range(3)]
        compact = {"input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "You are performing a CONTEXT CHECKPOINT COMPACTION."}
        ]}]}  # fmt: skip
        summary = post(server, "/v1/responses", compact)
    for events in answers:
        assert [e["event"] for e in events] == [
            "response.created", "response.output_item.done", "response.completed"
        ]  # fmt: skip
    call, patch, message = (events[1]["data"]["item"] for events in answers)
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "ls"} and call["call_id"]
    assert patch["type"] == "custom_tool_call" and patch["input"].startswith("*** Begin Patch")
    assert message["content"][0] == {"type": "output_text", "text": "Done here.",
                                     "annotations": []}  # fmt: skip
    usage = answers[2][2]["data"]["response"]["usage"]
    assert usage["input_tokens"] == 6000 and usage["total_tokens"] == 6020
    assert summary[1]["data"]["item"]["type"] == "message"
    assert [r.kind for r in server.requests] == ["turn", "turn", "turn", "compact"]


def test_a_held_reply_waits_for_its_release() -> None:
    with ResponsesServer() as server:
        held = Hold(Text("late"))
        server.script(held)
        got: list[list[dict[str, Any]]] = []
        client = threading.Thread(target=lambda: got.append(post(server, "/v1/responses", {})))
        client.start()
        assert held.held.wait(60)
        seen = server.wait_for(lambda r: r.kind == "turn")
        assert seen.index == 0 and not got  # recorded, not answered yet
        held.release()
        client.join(60)
    assert got[0][1]["data"]["item"]["content"][0]["text"] == "late"


def test_a_refusal_is_the_apis_error_without_retry() -> None:
    with AnthropicServer() as server:
        server.script(Fail())
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(server, "/v1/messages", {"tools": TOOLS, "messages": []})
    assert refused.value.code == 429
    assert refused.value.headers["x-should-retry"] == "false"
    error = json.loads(refused.value.read())
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert [r.kind for r in server.requests] == ["turn"]


def test_other_paths_are_refused_and_waits_have_a_deadline() -> None:
    with AnthropicServer() as server:
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(server, "/v1/complete", {})
        assert refused.value.code == 404
        with pytest.raises(AssertionError, match="no such request"):
            server.wait_for(lambda r: True, timeout=0.01)
    assert server.other_paths == ["POST /v1/complete"] and server.requests == []
