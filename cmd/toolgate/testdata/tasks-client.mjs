// An MCP client that speaks the Tasks extension (io.modelcontextprotocol/tasks)
// of the 2026-07-28 revision, for toolgate's Tasks black-box test
// (blackbox_tasks_test.go). It is the published client stack, pinned in the
// repository's package.json: @modelcontextprotocol/client negotiates the
// revision, @modelcontextprotocol/ext-tasks creates and follows the task.
//
// Usage: node tasks-client.mjs [--bearer=KEY] [--cancel] [--elicit-url] <endpoint> <tool> <arguments JSON>
//
// It calls the tool once and follows the task it gets until the task ends.
//
//	--bearer=KEY   sends Authorization: Bearer KEY with every request
//	--cancel       cancels the task after the first tasks/get that shows it
//	               working, then reads it once more (tasks/get): ext-tasks
//	               ends its own wait at the cancel acknowledgement
//	--elicit-url   declares URL-mode elicitation, prints each input request
//	               the task makes and accepts it, as a host does once it has
//	               shown its human the URL
//
// Every step is a JSON line on stdout:
//
//	{"event":"connected","protocolVersion","era","serverCapabilities"}
//	{"event":"session","generation","capabilities"}  the Tasks generation ext-tasks chose
//	{"event":"wire","method","request","response"}    each message of the Tasks exchange, as sent and received
//	{"event":"created","kind","taskId"}               what tools/call gave: a task, or an immediate result
//	{"event":"observed","task"}                       each task snapshot ext-tasks reports
//	{"event":"input-request","request","inputId"}     --elicit-url: an input request handed to the host
//	{"event":"outcome","status","result"|"error"}     how the call ended
//	{"event":"snapshot","task"}                       --cancel: the task read after the cancel
//	{"event":"error","message"}                       anything that went wrong (exit status 1)
//
// The wire lines are what the test asserts on: they are the server's
// answers as they arrived, before any library interpretation.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { DispatchError, createSessionPortFromClient, withTasks } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL_VERSION = "2026-07-28";
const CLIENT_INFO = { name: "toolgate-blackbox-tasks", version: "1.0.0" };

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

function describe(err) {
  if (!(err instanceof Error)) return String(err);
  const parts = [`${err.name}: ${err.message}`];
  if (err.code !== undefined) parts.push(`code=${JSON.stringify(err.code)}`);
  if (err.data !== undefined) parts.push(`data=${JSON.stringify(err.data)}`);
  if (err.cause !== undefined) parts.push(`cause=(${describe(err.cause)})`);
  return parts.join(" ");
}

// rawDispatcher is the request path ext-tasks needs for the Tasks messages of
// the 2026-07-28 revision: the SDK Client refuses a tools/call answer with
// resultType "task", so the host sends those messages itself. It is a second
// Streamable HTTP transport of the same SDK, which frames the HTTP exchange
// (MCP-Protocol-Version, Mcp-Method and Mcp-Name from the message, JSON or SSE
// answers); this function only pairs answers with requests. onResponse sees
// each answer before ext-tasks does.
async function rawDispatcher(endpoint, requestInit, onResponse) {
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), { requestInit });
  const waiting = new Map();
  let nextId = 1;
  transport.onmessage = (message) => {
    if (message.id === undefined || !waiting.has(message.id)) return;
    const settle = waiting.get(message.id);
    waiting.delete(message.id);
    settle.resolve(message);
  };
  transport.onerror = (err) => {
    for (const settle of waiting.values()) settle.reject(err);
    waiting.clear();
  };
  await transport.start();

  const dispatch = async (request, options = {}) => {
    const id = `tasks-${nextId++}`;
    const message = { jsonrpc: "2.0", id, ...request };
    const answer = new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    try {
      await transport.send(message, {
        requestSignal: options.signal,
        headers: options.context?.headers,
      });
    } catch (err) {
      waiting.delete(id);
      emit({ event: "wire", method: request.method, request: message, failure: describe(err) });
      throw new DispatchError(`${request.method} failed: ${err?.message ?? err}`, false, { cause: err });
    }
    let response;
    try {
      response = await answer;
    } catch (err) {
      emit({ event: "wire", method: request.method, request: message, failure: describe(err) });
      throw new DispatchError(`${request.method} failed: ${err?.message ?? err}`, false, { cause: err });
    }
    emit({ event: "wire", method: request.method, request: message, response });
    onResponse(request.method, response);
    if (response.error !== undefined) return { kind: "error", error: response.error };
    return { kind: "result", result: response.result };
  };
  return { dispatch, close: () => transport.close() };
}

async function main() {
  const flags = process.argv.slice(2).filter((a) => a.startsWith("--"));
  const [endpoint, tool, argsJSON] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  const cancel = flags.includes("--cancel");
  const elicitURL = flags.includes("--elicit-url");
  const bearer = flags.find((f) => f.startsWith("--bearer="))?.slice("--bearer=".length);
  if (!endpoint || !tool || flags.some((f) => f !== "--cancel" && f !== "--elicit-url" && !f.startsWith("--bearer="))) {
    throw new Error("usage: node tasks-client.mjs [--bearer=KEY] [--cancel] [--elicit-url] <endpoint> <tool> <arguments JSON>");
  }
  const toolArgs = argsJSON ? JSON.parse(argsJSON) : {};
  const requestInit = bearer === undefined ? undefined : { headers: { Authorization: `Bearer ${bearer}` } };

  // The SDK's default is the 2025 handshake; pinning makes the client speak
  // 2026-07-28 or fail, never fall back.
  const client = new Client(CLIENT_INFO, {
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit }));
  emit({
    event: "connected",
    protocolVersion: PROTOCOL_VERSION,
    era: client.getProtocolEra(),
    serverCapabilities: client.getServerCapabilities() ?? null,
  });

  let execution;
  let cancelRequested = false;
  const raw = await rawDispatcher(endpoint, requestInit, (method, response) => {
    if (!cancel || cancelRequested || method !== "tasks/get" || response.result?.status !== "working") return;
    cancelRequested = true;
    // Not from inside the dispatch ext-tasks is waiting on.
    setImmediate(() => {
      execution.cancel().then(
        () => emit({ event: "cancel-sent", taskId: execution.handle.taskId }),
        (err) => emit({ event: "error", message: `cancel: ${describe(err)}` }),
      );
    });
  });
  const port = createSessionPortFromClient(client, "toolgate-blackbox", {
    rawDispatch: raw.dispatch,
    v2RequestFraming: {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: elicitURL ? { elicitation: { url: {} } } : {},
    },
  });
  const session = withTasks(port, {
    onError: (err) => emit({ event: "error", message: describe(err) }),
    ...(elicitURL
      ? {
          onInputRequest: async (request, context) => {
            emit({ event: "input-request", request, scope: context.scope, delivery: context.delivery, inputId: context.inputId ?? null });
            return { action: "accept" };
          },
        }
      : {}),
  });
  emit({ event: "session", generation: port.taskCapabilities.generation, capabilities: session.capabilities });

  try {
    execution = await session.callTool(tool, toolArgs);
    emit({ event: "created", kind: execution.kind, taskId: execution.handle?.taskId ?? null });

    const { outcome } = await execution.settle({
      onEvent: (event) => {
        if (event.type === "task") emit({ event: "observed", task: event.task });
      },
    });
    switch (outcome.status) {
      case "completed":
        emit({ event: "outcome", status: "completed", result: outcome.result, task: outcome.task ?? null });
        break;
      case "failed":
        emit({ event: "outcome", status: "failed", error: describe(outcome.error), task: outcome.task ?? null });
        break;
      default:
        emit({ event: "outcome", status: outcome.status, task: outcome.task ?? null });
    }
    if (cancel && execution.kind === "task") {
      const task = await session.task(execution.handle.taskId).snapshot();
      emit({ event: "snapshot", task });
    }
  } finally {
    await session.close();
    port[Symbol.dispose]();
    await raw.close();
    await client.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    emit({ event: "error", message: describe(err) });
    process.exit(1);
  },
);
