#!/usr/bin/env python3
"""llm_server.py - a local stand-in for the two chat APIs, for test_llm_client.

Serves POST /v1/chat/completions (OpenAI style) and POST /v1/messages
(Anthropic style) on 127.0.0.1, on a free port that it prints on its first
line of stdout. The user message of a request (its prompt) picks the
behaviour; a prompt may end in "-TAG" (letters or digits) to make several
independent requests with one behaviour, e.g. "429once-openai":

  ok            a reply "```cuda\\nint ok;\\n```", usage 100 in / 20 out
  hold          waits 0.5 s, then ok (to watch the concurrency limit)
  429once       the first request with this prompt: 429 with Retry-After: 1; then ok
  500once       the first request: 500 (no Retry-After); then ok
  500always     500 every time
  502html       502 with an HTML page (not JSON) every time
  401           401 with an error message that echoes the request's headers
  echo          200 whose reply text echoes the request's headers
  echofrag      200 whose reply text and 401 whose error echo pieces of the key:
                (echofrag401) all but its last character, 14 characters from
                its middle, all but its first four
  slow          waits 3 s before answering ok (beyond the client's timeout)
  malformed     200 with a body that is not JSON
  truncated     200 whose Content-Length promises more than is sent
  nocontent     200 without any reply text, usage 100 in / 20 out
  huge          200 with a 9 MiB body (over the client's cap)
  usageX        ok, with a usage whose counts are X: absurd (1e8, in range),
                huge (1e30), max (2^64-1),
                inf (1e999), neg (-5), str ("100"), frac (2.5), none (no usage
                object); the reply text is 400 characters

GET /stats returns {"max_concurrent": N, "requests": N, "first_at": {...},
"second_at": {...}}: the most requests it had in flight at once, how many it
received, and per prompt when its first and second requests arrived
(time.monotonic() seconds).

With a script (its one argument, a JSON file {"replies": [...], "then": B,
"dump": DIR}), the prompt does not choose: request k (from 1, retries
included) gets replies[k-1], and every request after the list gets `then`.
Prompts written by kevo's search hold the parent's source ("## Parent" and
a cuda block), which these behaviours work on:

  edit          one SEARCH/REPLACE edit that sets one of the parent's tunable
                parameters (a "// kevo:param" annotation and its #define) to
                another allowed value
  whole         the parent as a whole file, one parameter changed
  holdedit      waits 0.5 s, then edit
  append        the parent as a whole file with a line appended (a constant,
                new each request): a child of a parent without parameters
  schedule      the parent's schedule (the prompt's "## The parent's schedule"
                block) with threads= changed (512 -> 256 -> 128 -> 1024 -> 512, by k),
                in a ```schedule block; prose when the prompt shows none
  badschedule   a ```schedule block that does not parse (xport=sm32)
  nocode        prose without code
  absent        an edit whose SEARCH text is not in the parent
  edit8         edit, with a comment of bytes that are not UTF-8 on the new line
                and terminal controls in the prose; no usage (an empty object)
  hostile       400 whose error message holds ESC [2J, an OSC title, BEL, CR,
                LF and bytes that are not UTF-8
  429, 500      429 with Retry-After: 1; 500 (neither reports usage)
  echo, 401, slow, ok
                as above
Replies with text report usage 20 out and, in, the prompt's bytes / 4 rounded
up (kevo's own estimate, so that with max_tokens 20 a request costs exactly
its maximum). When "dump" is given, the
user message of request k is written to DIR/k.txt.
"""
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"in_flight": 0, "max_concurrent": 0, "requests": 0, "seen": {}, "first_at": {},
         "second_at": {}}


def behaviour(prompt):
    head, _, tail = prompt.rpartition("-")
    return head if head and tail.isalnum() else prompt


script = None


def parent_of(prompt):
    m = re.search(r"## Parent\n\n```cuda\n(.*?)^```$", prompt, re.S | re.M)
    return m.group(1) if m else ""


def params_of(src):
    """(name, current #define line, allowed values) of each tunable parameter."""
    out = []
    for m in re.finditer(r"// kevo:param (\w+) default=\S+ (values=([\d,]+)|range=(\d+)\.\.(\d+))",
                         src):
        name = m.group(1)
        values = ([int(v) for v in m.group(3).split(",")] if m.group(3)
                  else list(range(int(m.group(4)), int(m.group(5)) + 1)))
        line = re.search(r"^#define " + name + r" (-?\d+)$", src, re.M)
        if line and len(values) > 1:
            out.append((name, line.group(0), int(line.group(1)), values))
    return out


def changed(src, k, step):
    """One parameter (the k-th, cyclically) moved `step` allowed values on:
    (old #define line, new one), or None without parameters."""
    ps = params_of(src)
    if not ps:
        return None
    name, line, value, values = ps[k % len(ps)]
    i = values.index(value) if value in values else 0
    return line, "#define %s %d" % (name, values[(i + step) % len(values)])


def scripted(k, prompt):
    """(status, text or None, headers) of scripted request k."""
    replies = script.get("replies", [])
    b = replies[k - 1] if k <= len(replies) else script.get("then", "edit")
    parent = parent_of(prompt)
    if b == "holdedit":
        time.sleep(0.5)
        b = "edit"
    if b in ("edit", "whole", "edit8"):
        c = changed(parent, k, 1 if b != "whole" else -1)
        if c is None:
            return 200, "This parent has no tunable parameter.", {}
        if b == "edit8":  # a comment of bytes that are not UTF-8 on the new line
            return 200, ("Raise it \x1b[2J\x07:\n<<<<<<< SEARCH\n%s\n=======\n%s // %s\n"
                         ">>>>>>> REPLACE\n" % (c[0], c[1], NOT_UTF8)), {}
        if b == "edit":
            return 200, ("Raise it:\n<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE\n"
                         % c), {}
        return 200, "```cuda\n" + parent.replace(c[0], c[1], 1) + "```\n", {}
    if b == "append":
        return 200, "```cuda\n%sstatic const int kevo_append_%d = %d;\n```\n" % (parent, k, k), {}
    if b == "schedule":
        m = re.search(r"## The parent's schedule\n.*?```schedule\n(.*?)\n```", prompt, re.S)
        if not m:
            return 200, "This parent has no schedule.", {}
        order = ["512", "256", "128", "1024"]
        t = re.search(r"threads=(\d+)", m.group(1))
        cur = t.group(1) if t else "512"
        nxt = order[(order.index(cur) + 1 + k % 3) % 4] if cur in order else "256"
        text = re.sub(r"threads=\d+", "threads=" + nxt, m.group(1), count=1)
        return 200, "Fewer threads:\n```schedule\n%s\n```\n" % text, {}
    if b == "badschedule":
        return 200, "```schedule\nallreduce; rs xport=sm32; ag\n```\n", {}
    if b == "nocode":
        return 200, "I would try a larger chunk size, but I am not sure it helps.", {}
    if b == "absent":
        return 200, ("<<<<<<< SEARCH\nthis line is not in the parent\n=======\n"
                     "neither is this one\n>>>>>>> REPLACE\n"), {}
    if b == "hostile":
        return 400, None, {}
    if b == "429":
        return 429, None, {"Retry-After": "1"}
    if b == "500":
        return 500, None, {}
    return None, b, {}  # one of the prompt-chosen behaviours


# bytes that are not UTF-8 (surrogate escapes, sent as the raw bytes): a lone
# continuation byte, an overlong "/", a truncated euro sign
NOT_UTF8 = "\udc80 \udcc0\udcaf \udce2\udc82"
# an error message that would clear the screen, set the terminal's title,
# ring, and rewrite the line, if printed raw
HOSTILE = "\x1b[2J\x1b]0;title\x07\rEVIL\nline two " + NOT_UTF8


def prompt_tokens(req):
    """The prompt's tokens as kevo estimates them: its bytes / 4, rounded up."""
    n = len(req.get("system", "").encode())
    for m in req.get("messages", []):
        n += len(m.get("content", "").encode())
    return (n + 3) // 4


def user_text(req):
    for m in req.get("messages", []):
        if m.get("role") == "user":
            return m.get("content", "")
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, headers=None, length=None, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        with lock:
            body = json.dumps({k: state[k] for k in ("max_concurrent", "requests", "first_at",
                                                      "second_at")})
        self.send(200, body)

    def reply_ok(self, anthropic, text="```cuda\nint ok;\n```", usage=True, tokens_in=100):
        """(text may carry bytes that are not UTF-8 as surrogate escapes)"""
        if anthropic:
            body = {"content": [{"type": "text", "text": text}] if text else [],
                    "usage": {"input_tokens": tokens_in, "output_tokens": 20} if usage else {}}
        else:
            body = {"choices": [{"message": {"role": "assistant", "content": text}}]
                    if text else [],
                    "usage": {"prompt_tokens": tokens_in, "completion_tokens": 20}
                    if usage else {}}
        self.send(200, json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogateescape"))

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:  # a request abandoned while it was being sent
            self.close_connection = True
            return
        anthropic = self.path.endswith("/messages")
        prompt = user_text(req)
        b = behaviour(prompt)
        with lock:
            state["requests"] += 1
            k = state["requests"]
            state["in_flight"] += 1
            state["max_concurrent"] = max(state["max_concurrent"], state["in_flight"])
            count = state["seen"].get(prompt, 0) + 1
            state["seen"][prompt] = count
            if count <= 2:
                state["first_at" if count == 1 else "second_at"][prompt] = time.monotonic()
        echoed = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
        if script is not None:
            if script.get("dump"):
                with open(os.path.join(script["dump"], "%d.txt" % k), "w") as f:
                    f.write(prompt)
            status, text, headers = scripted(k, prompt)
            if status is None:
                b = text
            else:
                try:
                    if status == 200:
                        self.reply_ok(anthropic, text, tokens_in=prompt_tokens(req),
                                      usage=NOT_UTF8 not in text)  # edit8: no usage
                    elif status == 400:  # hostile: terminal controls, bytes that are not UTF-8
                        self.send(400, ('{"error": {"message": "%s"}}' % json.dumps(
                            HOSTILE, ensure_ascii=False)[1:-1]).encode("utf-8", "surrogateescape"))
                    else:
                        self.send(status, json.dumps({"error": {"message": "scripted %d" % status}}),
                                  headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with lock:
                        state["in_flight"] -= 1
                return
        tin = 100 if script is None else prompt_tokens(req)
        try:
            if b == "429once" and count == 1:
                self.send(429, json.dumps({"error": {"message": "rate limited"}}),
                          {"Retry-After": "1"})
            elif (b == "500once" and count == 1) or b == "500always":
                self.send(500, json.dumps({"error": {"message": "upstream overloaded"}}))
            elif b == "502html":
                self.send(502, "<html>\n<head><title>502 Bad Gateway</title></head>\n</html>\n",
                          ctype="text/html")
            elif b == "401":
                self.send(401, json.dumps({"error": {"message": "bad key, got " + echoed}}))
            elif b in ("echofrag", "echofrag401"):
                v = self.headers.get("x-api-key") or self.headers.get("Authorization", "")[7:]
                frags = "cut: %s mid: %s tail: %s" % (v[:-1], v[5:19], v[4:])
                if b == "echofrag":
                    self.reply_ok(anthropic, "```cuda\n// " + frags + "\n```", tokens_in=tin)
                else:
                    self.send(401, json.dumps({"error": {"message": "bad key " + frags}}))
            elif b == "echo":
                self.reply_ok(anthropic, "```cuda\n// " + echoed + "\n```", tokens_in=tin)
            elif b == "slow":
                time.sleep(3)
                self.reply_ok(anthropic, tokens_in=tin)
            elif b == "malformed":
                self.send(200, "{not json")
            elif b == "truncated":
                self.send(200, '{"choices": [', length=500)
                self.close_connection = True
            elif b == "nocontent":
                self.reply_ok(anthropic, text="", tokens_in=tin)
            elif b == "huge":
                self.send(200, b" " * (9 << 20))
            elif b.startswith("usage") and b[5:] in USAGE:
                v = USAGE[b[5:]]
                text = "```cuda\n" + "x" * 388 + "\n```"
                if anthropic:
                    body = '{"content": [{"type": "text", "text": %s}]%s}' % (
                        json.dumps(text), "" if v is None else
                        ', "usage": {"input_tokens": %s, "output_tokens": %s}' % (v, v))
                else:
                    body = '{"choices": [{"message": {"content": %s}}]%s}' % (
                        json.dumps(text), "" if v is None else
                        ', "usage": {"prompt_tokens": %s, "completion_tokens": %s}' % (v, v))
                self.send(200, body)
            elif b == "hold":
                time.sleep(0.5)
                self.reply_ok(anthropic, tokens_in=tin)
            else:
                self.reply_ok(anthropic, tokens_in=tin)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with lock:
                state["in_flight"] -= 1


# the usage counts of the usageX behaviours, as JSON text (None: no usage)
USAGE = {"absurd": "100000000", "huge": "1e30", "max": "18446744073709551615", "inf": "1e999", "neg": "-5",
         "str": '"100"', "frac": "2.5", "none": None}


def watch_parent(parent):
    """Exits when the test that started the server is gone (a crashed test
    must not leave the server holding ctest's output pipe)."""
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # the default 5 refuses connections on a loaded machine

    def handle_error(self, request, client_address):
        # the client hangs up on purpose (timeouts, oversized bodies, abandoned requests)
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def main():
    global script
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as f:
            script = json.load(f)
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
