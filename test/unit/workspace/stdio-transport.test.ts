import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { StdioTransport, type StdioTransportOptions } from "@/server/workspace/mcp/stdio-transport";
import { everythingMcp } from "./support/mcp-servers";

/**
 * The stdio transport under Berth's MCP clients (stdio-transport.ts): what the SDK's StdioClientTransport
 * does, plus `intercept`. The scripts below are small servers written for one behaviour each.
 */
const started: StdioTransport[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(started.splice(0).map((transport) => transport.close()));
});

/** A node child can take seconds to start on a busy 2-core machine (vi.waitFor waits 1 s by default). */
const WAIT = { timeout: 15_000 };

/** A transport running `script` with this Node, recording what it hands on. */
async function run(script: string, options: StdioTransportOptions = {}) {
  const transport = new StdioTransport({ command: process.execPath, args: ["-e", script] }, options);
  started.push(transport);
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  transport.onmessage = (message) => messages.push(message);
  transport.onerror = (error) => errors.push(error);
  await transport.start();
  return { transport, messages, errors, closed };
}

/** What the server printed on stderr so far. */
function collect(transport: StdioTransport): () => string {
  let text = "";
  transport.stderr.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
  return () => text;
}

/** Answers each line it reads with what `reply` makes of it, one JSON text per line. */
const replying = (reply: string) => `
  let rest = "";
  process.stdin.on("data", (chunk) => {
    rest += chunk;
    let newline;
    while ((newline = rest.indexOf("\\n")) !== -1) {
      const message = JSON.parse(rest.slice(0, newline));
      rest = rest.slice(newline + 1);
      for (const line of (${reply})(message)) process.stdout.write(line + "\\n");
    }
  });`;

describe("StdioTransport", { timeout: 30_000 }, () => {
  it("serves the SDK client against a real server, with the server's stderr readable", async () => {
    const declaration = everythingMcp("everything").mcp_config;
    if (declaration.type !== "stdio_mcp") throw new Error("a stdio declaration was expected");
    const transport = new StdioTransport({ command: declaration.command, args: declaration.args });
    started.push(transport);
    let stderr = "";
    transport.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const client = new Client({ name: "test", version: "1" });
    await client.connect(transport);
    expect(transport.pid).toBeGreaterThan(0);
    const result = await client.callTool({ name: "echo", arguments: { message: "hi" } });
    expect(result.content).toEqual([{ type: "text", text: "Echo: hi" }]);
    await vi.waitFor(() => expect(stderr).toContain("Starting default (STDIO) server"), WAIT);
    await client.close();
    expect(transport.pid).toBeNull();
  });

  it("hands intercepted messages on unchecked and checks every other one against the schema", async () => {
    const { transport, messages, errors } = await run(
      replying(`(m) => [
        JSON.stringify({ jsonrpc: "2.0", id: "mine-" + m.id, result: { raw: true } }),
        JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { ok: true } }),
        JSON.stringify({ jsonrpc: "2.0", id: m.id, bogus: true }),
        "not json",
      ]`),
    );
    const intercepted: unknown[] = [];
    transport.intercept = (message) => {
      const taken = (message as { id?: unknown }).id === "mine-7";
      if (taken) intercepted.push(message);
      return taken;
    };
    const schemaParse = vi.spyOn(JSONRPCMessageSchema, "parse");
    await transport.send({ jsonrpc: "2.0", id: 7, method: "ping" });
    await vi.waitFor(() => expect(errors).toHaveLength(2), WAIT);
    expect(intercepted).toEqual([{ jsonrpc: "2.0", id: "mine-7", result: { raw: true } }]);
    // The valid answer went through the schema; the shapeless one and the non-JSON line were reported.
    expect(messages).toEqual([{ jsonrpc: "2.0", id: 7, result: { ok: true } }]);
    expect(schemaParse).toHaveBeenCalledTimes(2);
    expect(errors.map((error) => error.name)).toEqual(["ZodError", "SyntaxError"]);
  });

  it("reassembles a message split across writes, and a line ending in CR", async () => {
    // The first half goes out when the first line arrives, the rest with the second.
    const { transport, messages } = await run(`
      const text = JSON.stringify({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "x".repeat(200000) } });
      let lines = 0;
      process.stdin.on("data", (chunk) => {
        for (const byte of chunk) {
          if (byte !== 10) continue;
          lines += 1;
          if (lines === 1) process.stdout.write(text.slice(0, 1000), () => process.stderr.write("half"));
          if (lines === 2) process.stdout.write(text.slice(1000) + "\\r\\n");
        }
      });`);
    const stderr = collect(transport);
    await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await vi.waitFor(() => expect(stderr()).toBe("half"), WAIT);
    expect(messages).toHaveLength(0);
    await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await vi.waitFor(() => expect(messages).toHaveLength(1), WAIT);
    expect(messages[0]).toMatchObject({ method: "notifications/message", params: { level: "info" } });
  });

  it("closes on a line beyond 10 MiB without a newline", async () => {
    const { transport, errors, closed } = await run(`
      process.stdin.once("data", () => process.stdout.write("[" + "1,".repeat(6 * 1024 * 1024)));
      setInterval(() => undefined, 1000);`);
    await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await closed;
    expect(errors[0]?.message).toContain("exceeds");
  });

  it("close ends stdin, then sends SIGTERM, then SIGKILL to a server that ignores both", async () => {
    // A polite server leaves when its stdin ends, so close() returns then; the long step only gives a
    // slow-starting child time to install its handler before the ladder would go on to SIGTERM.
    const polite = await run(
      `process.stdin.on("end", () => { process.stderr.write("stdin ended"); process.exit(0); }); process.stdin.resume();`,
      { closeStepMs: 15_000 },
    );
    const politeErr = collect(polite.transport);
    await polite.transport.close();
    await polite.closed;
    expect(politeErr()).toBe("stdin ended");

    // Each step of close() waits 1 s here instead of 2 (the ladder is the same; the ignored SIGTERM still
    // has a second to be handled and say so on a loaded machine).
    const stubborn = await run(
      `process.on("SIGTERM", () => process.stderr.write("SIGTERM ignored")); setInterval(() => undefined, 1000);`,
      { closeStepMs: 1_000 },
    );
    const stubbornErr = collect(stubborn.transport);
    const pid = stubborn.transport.pid;
    await stubborn.transport.close();
    await stubborn.closed;
    expect(stubbornErr()).toBe("SIGTERM ignored");
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid!, 0)).toThrow();
  });

  it("waits for a server that stopped reading with one listener, and fails the waiting sends on close", async () => {
    // Reads nothing until SIGUSR2 (it says "ready" once it handles the signal), so the pipe fills and later
    // sends wait.
    const script = `process.stdin.pause(); process.on("SIGUSR2", () => process.stdin.resume()); process.stderr.write("ready"); setInterval(() => undefined, 1000);`;
    const message = {
      jsonrpc: "2.0" as const,
      method: "notifications/message",
      params: { data: "x".repeat(64 * 1024) },
    };
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const reading = await run(script);
      const readingErr = collect(reading.transport);
      const sent = Array.from({ length: 40 }, () => reading.transport.send(message));
      const settled = vi.fn();
      for (const send of sent) void send.then(settled, () => undefined);
      await vi.waitFor(() => expect(settled.mock.calls.length).toBeGreaterThan(0), WAIT);
      expect(settled.mock.calls.length).toBeLessThan(40);
      await vi.waitFor(() => expect(readingErr()).toBe("ready"), WAIT);
      process.kill(reading.transport.pid!, "SIGUSR2");
      await Promise.all(sent);

      // Its stdin is never read, so close() goes on to SIGTERM after its first step: 250 ms here, not 2 s.
      const stuck = await run(script, { closeStepMs: 250 });
      const waiting = Array.from({ length: 40 }, () =>
        stuck.transport.send(message).catch((e: unknown) => e),
      );
      await stuck.transport.close();
      const outcomes = await Promise.all(waiting);
      expect(
        outcomes.some((outcome) => outcome instanceof Error && outcome.message === "Not connected"),
      ).toBe(true);
      expect(warnings.filter((warning) => warning.name === "MaxListenersExceededWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("fails start for a command that does not exist, and send when not started", async () => {
    const transport = new StdioTransport({ command: "/nonexistent/mcp-server", args: [] });
    const errors: Error[] = [];
    transport.onerror = (error) => errors.push(error);
    await expect(transport.start()).rejects.toMatchObject({ code: "ENOENT" });
    expect(errors).toHaveLength(1);
    await expect(transport.send({ jsonrpc: "2.0", method: "ping", id: 1 })).rejects.toThrow("Not connected");
  });
});
