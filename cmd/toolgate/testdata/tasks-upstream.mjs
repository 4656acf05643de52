// An MCP upstream that speaks the 2026-07-28 revision, for toolgate's Tasks
// black-box test (blackbox_tasks_test.go). server-everything, the upstream of
// the other black-box test, speaks only the 2025 revisions, so this one is
// built on the reference TypeScript server SDK (@modelcontextprotocol/server,
// pinned in the repository's package.json) with two tools that answer like
// server-everything's echo: echo ("Echo: <message>") and publish
// ("Published: <message>"), so that the test's rules can ask of each in
// another way.
//
// It knows nothing of tasks: toolgate is what turns a parked call into a
// task. Each execution of a tool is printed on stdout as a JSON line
// ({"event":"executed",...}) so that the test counts executions at the
// upstream itself; the first line, {"event":"listening","port":N}, tells the
// test where to send toolgate.
//
// Usage: node tasks-upstream.mjs

import http from "node:http";
import { McpServer, createMcpHandler, fromJsonSchema } from "@modelcontextprotocol/server";

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

const handler = createMcpHandler(
  () => {
    const server = new McpServer({ name: "toolgate-tasks-upstream", version: "1.0.0" });
    for (const [tool, verb] of [
      ["echo", "Echo"],
      ["publish", "Published"],
    ]) {
      server.registerTool(
        tool,
        {
          description: `Answers "${verb}: <message>"`,
          inputSchema: fromJsonSchema({
            type: "object",
            properties: { message: { type: "string", description: "The message" } },
            required: ["message"],
          }),
        },
        async ({ message }) => {
          emit({ event: "executed", tool, message });
          return { content: [{ type: "text", text: `${verb}: ${message}` }] };
        },
      );
    }
    return server;
  },
  // Only the 2026-07-28 revision: a request that falls back to a 2025 one
  // would not exercise what the test is about.
  { legacy: "reject", onerror: (err) => process.stderr.write(`upstream: ${err?.stack ?? err}\n`) },
);

// node:http in front of the SDK's fetch-shaped handler.
const server = http.createServer(async (req, res) => {
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  try {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const v of Array.isArray(value) ? value : [value]) {
        if (v !== undefined) headers.append(name, v);
      }
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const request = new Request(`http://${req.headers.host ?? "127.0.0.1"}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? Buffer.concat(chunks) : undefined,
      signal: abort.signal,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (err) {
    process.stderr.write(`upstream: ${err?.stack ?? err}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});

server.listen(0, "127.0.0.1", () => {
  emit({ event: "listening", port: server.address().port });
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    server.close();
    void handler.close();
    process.exit(0);
  });
}
