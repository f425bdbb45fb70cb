import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { McpRegistry, type McpRegistryOptions } from "@/server/workspace/mcp/mcp-registry";
import type { EngineLogger, McpScope } from "@/server/workspace/mcp/types";
import {
  RecordingConnector,
  everythingMcp,
  httpMcp,
  startHttpMcpServer,
  type TestHttpMcpServer,
} from "./support/mcp-servers";

const A: McpScope = { agentId: "agent-a", sessionId: "s1" };
const B: McpScope = { agentId: "agent-b", sessionId: "s1" };
const C: McpScope = { agentId: "agent-a", sessionId: "s2" };

let workdir: string;
let registries: McpRegistry[] = [];
let clock = 0;
/** One real streamable-HTTP MCP server (the SDK's) for the file: its sessions cost no process. */
let server: TestHttpMcpServer;
beforeAll(async () => {
  server = await startHttpMcpServer();
});
afterAll(async () => {
  await server.close();
});

function makeRegistry(options: Partial<McpRegistryOptions> & { connector: RecordingConnector }) {
  const warnings: string[] = [];
  const logger: EngineLogger = { warn: (_details, message) => warnings.push(message) };
  const registry = new McpRegistry({
    persistence: { machine: new HostFolderMachine({ workdir }) },
    logger,
    now: () => (clock += 1),
    ...options,
  });
  registries.push(registry);
  return { registry, warnings };
}

const recording = () => new RecordingConnector(new LocalMcpConnector({ defaultCallTimeoutMs: 20_000 }));
const readMcpFile = () => fs.readFile(path.join(workdir, ".mcp"), "utf8");

beforeEach(async () => {
  workdir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mcp-registry-")));
});

afterEach(async () => {
  await Promise.all(registries.map((registry) => registry.closeAll()));
  registries = [];
  await fs.rm(workdir, { recursive: true, force: true });
});

describe("McpRegistry declarations", { timeout: 120_000 }, () => {
  it("seeds fresh copies of the defaults until a scope diverges; .mcp holds only diverged scopes", async () => {
    const connector = recording();
    const { registry } = makeRegistry({ connector, defaultMcps: [everythingMcp("base")] });
    const copy = registry.declarations(A);
    copy[0]!.name = "mutated";
    expect(registry.declarations(A).map((d) => d.name)).toEqual(["base"]);
    expect((await registry.list(A)).map((client) => client.declaration.name)).toEqual(["base"]);
    await expect(fs.stat(path.join(workdir, ".mcp"))).rejects.toThrow();

    await registry.remove("base", A);
    expect(registry.declarations(A)).toEqual([]);
    expect(registry.declarations(B).map((d) => d.name)).toEqual(["base"]);
    expect(JSON.parse(await readMcpFile())).toEqual({ version: 2, mcps: { "agent-a": { s1: [] } } });

    // The empty list is meaningful: a restored registry does not reseed A.
    const { registry: restored } = makeRegistry({
      connector: recording(),
      defaultMcps: [everythingMcp("base")],
    });
    await restored.restore();
    expect(restored.declarations(A)).toEqual([]);
    expect(restored.declarations(B).map((d) => d.name)).toEqual(["base"]);
  });

  it("add returns the live client (reference #2774), persists, and refuses a duplicate name", async () => {
    const connector = recording();
    const { registry } = makeRegistry({ connector, defaultMcps: [everythingMcp("base")] });
    const client = await registry.add(everythingMcp("extra"), A);
    expect(client.isConnected).toBe(true);
    expect(await client.callTool("echo", { message: "live" })).toMatchObject({
      content: [{ text: "Echo: live" }],
    });
    expect(registry.declarations(A).map((d) => d.name)).toEqual(["base", "extra"]);
    expect(
      Object.keys((JSON.parse(await readMcpFile()) as { mcps: Record<string, object> }).mcps["agent-a"]!),
    ).toEqual(["s1"]);

    const duplicate = await registry.add(everythingMcp("base"), A).catch((e: unknown) => e);
    expect(duplicate).toBeInstanceOf(AppError);
    expect((duplicate as AppError).code).toBe("CONFLICT");

    // list() hands back the same instance add() returned, not a second server.
    const listed = await registry.list(A);
    expect(listed.map((c) => c.declaration.name)).toEqual(["base", "extra"]);
    expect(connector.connects.filter((c) => c.name === "extra")).toHaveLength(1);
  });

  it("rejects an invalid declaration with BAD_REQUEST and records nothing when the start fails", async () => {
    const { registry } = makeRegistry({ connector: recording() });
    const invalid = { ...everythingMcp("x"), name: "no spaces allowed" };
    await expect(registry.add(invalid, A)).rejects.toMatchObject({ code: "BAD_REQUEST" });
    const broken = everythingMcp("broken", {
      mcp_config: {
        type: "stdio_mcp",
        command: "/nonexistent/berth-mcp",
        args: [],
        env: null,
        cwd: null,
        encoding_error_handler: "strict",
      },
    });
    await expect(registry.add(broken, A)).rejects.toBeInstanceOf(AppError);
    expect(registry.declarations(A)).toEqual([]);
    await expect(fs.stat(path.join(workdir, ".mcp"))).rejects.toThrow();
  });

  it("remove of an unknown name is a typed NOT_FOUND", async () => {
    const { registry } = makeRegistry({ connector: recording() });
    const error = await registry.remove("ghost", A).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "NOT_FOUND", details: { name: "ghost" } });
  });

  it("skips a server that fails to start, returns the rest, and retries it on the next list", async () => {
    const script = path.join(workdir, "flaky.mjs");
    const marker = path.join(workdir, "ready");
    // Exits at once until the marker exists, then execs server-everything.
    await fs.writeFile(
      script,
      `import fs from "node:fs"; if (!fs.existsSync(${JSON.stringify(marker)})) process.exit(1);\n` +
        `process.argv.push("stdio"); await import(${JSON.stringify(path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))});\n`,
    );
    const flaky = everythingMcp("flaky", {
      mcp_config: {
        type: "stdio_mcp",
        command: process.execPath,
        args: [script],
        env: null,
        cwd: null,
        encoding_error_handler: "strict",
      },
    });
    const { registry, warnings } = makeRegistry({
      connector: recording(),
      defaultMcps: [flaky, everythingMcp("good")],
    });
    expect((await registry.list(A)).map((c) => c.declaration.name)).toEqual(["good"]);
    expect(warnings).toContain("Failed to start MCP; skipping it until the next list");
    await fs.writeFile(marker, "");
    expect((await registry.list(A)).map((c) => c.declaration.name)).toEqual(["flaky", "good"]);
  });
});

/**
 * The cap counts live stateful instances, whatever their transport: each stateful HTTP declaration holds
 * its own session on the file's server, as a stdio one holds its own process. Sessions, because these tests
 * open 16 instances, each a server-everything process (seconds of CPU) over stdio; the stdio
 * path of eviction (closing a process) is the declarations tests' and mcp-local-connector.test.ts's.
 */
const statefulMcp = (name: string) => httpMcp(name, server.url, true);

describe("McpRegistry capacity (LRU over scopes, never the caller)", { timeout: 120_000 }, () => {
  it("cap=2 with two stateful defaults: A connects 2, B evicts both of A's, A reconnects: 6 connects", async () => {
    const connector = recording();
    const { registry } = makeRegistry({
      connector,
      defaultMcps: [statefulMcp("one"), statefulMcp("two")],
      maxLiveStatefulMcps: 2,
    });
    const before = { opened: server.sessionsOpened, closed: server.sessionsClosed };
    await registry.list(A);
    expect(registry.stats().liveStateful).toBe(2);
    await registry.list(B);
    expect(connector.closes.map((c) => [c.scope.agentId, c.name])).toEqual([
      ["agent-a", "one"],
      ["agent-a", "two"],
    ]);
    expect(registry.stats().liveStateful).toBe(2);
    // Evicted means ended: the server saw A's two sessions terminated, and B's two open.
    expect(server.sessionsOpened - before.opened).toBe(4);
    expect(server.sessionsClosed - before.closed).toBe(2);
    const again = await registry.list(A);
    expect(again.map((c) => c.declaration.name)).toEqual(["one", "two"]);
    expect(connector.connects).toHaveLength(6);
    expect(registry.stats().liveStateful).toBe(2);
  });

  it("never evicts the caller's own scope: the cap is exceeded with a warning instead", async () => {
    const connector = recording();
    const { registry, warnings } = makeRegistry({
      connector,
      defaultMcps: [statefulMcp("one"), statefulMcp("two"), statefulMcp("three")],
      maxLiveStatefulMcps: 2,
    });
    expect(await registry.list(A)).toHaveLength(3);
    expect(registry.stats().liveStateful).toBe(3);
    expect(connector.closes).toEqual([]);
    expect(warnings).toContain("All live stateful MCPs belong to the requesting scope; exceeding the cap");
  });

  it("add refreshes recency, so the scope that only added is not the first victim", async () => {
    const connector = recording();
    const { registry } = makeRegistry({
      connector,
      defaultMcps: [statefulMcp("base")],
      maxLiveStatefulMcps: 2,
    });
    await registry.list(A); // A used at t1
    await registry.list(B); // B used at t2
    await registry.add(statefulMcp("extra"), A); // A used at t3: B is now least recent
    expect(connector.closes.map((c) => c.scope.agentId)).toEqual(["agent-b"]);
    await registry.list(C); // B has nothing left to evict, so A (the only other holder) loses one
    expect(connector.closes.map((c) => c.scope.agentId)).toEqual(["agent-b", "agent-a"]);
  });

  it("a tool descriptor restarts its evicted MCP instead of failing the call", async () => {
    const connector = recording();
    const { registry } = makeRegistry({
      connector,
      defaultMcps: [statefulMcp("one")],
      maxLiveStatefulMcps: 1,
    });
    const tools = await registry.tools(A);
    const echo = tools.find((tool) => tool.name === "mcp__one__echo");
    expect(echo?.inputSchema).toMatchObject({ type: "object" });
    await registry.list(B); // evicts A's instance
    expect(connector.closes.map((c) => c.scope.agentId)).toEqual(["agent-a"]);
    expect(await echo!.call({ message: "back" })).toMatchObject({
      isError: false,
      content: [{ text: "Echo: back" }],
    });
  });
});

describe("McpRegistry tools, filtering, timeouts and purge", { timeout: 120_000 }, () => {
  it("names tools mcp__<mcp>__<tool>, applies allow/deny lists, and maps call failures to isError results", async () => {
    const { registry } = makeRegistry({
      connector: recording(),
      defaultMcps: [
        everythingMcp("every", {
          enable_tools: ["echo", "trigger-long-running-operation"],
          execution_timeout: 0.3,
        }),
        httpMcp("web", server.url, false),
      ],
    });
    const tools = await registry.tools(A);
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      "mcp__every__echo",
      "mcp__every__trigger-long-running-operation",
      "mcp__web__echo",
      "mcp__web__wait",
    ]);
    const slow = tools.find((tool) => tool.name === "mcp__every__trigger-long-running-operation")!;
    const timedOut = await slow.call({ duration: 30, steps: 3 });
    expect(timedOut.isError).toBe(true);
    expect(JSON.stringify(timedOut.content)).toContain("timed out");
    const webEcho = tools.find((tool) => tool.name === "mcp__web__echo")!;
    expect(await webEcho.call({ message: "http" })).toMatchObject({ content: [{ text: "Echo: http" }] });
  });

  it("removing a stateless MCP closes its client and ends in-flight sessions (reference #2773)", async () => {
    const connector = recording();
    const { registry } = makeRegistry({ connector });
    const client = await registry.add(httpMcp("web", server.url, false), A);
    const before = { opened: server.sessionsOpened, closed: server.sessionsClosed };
    const inFlight = client.callTool("wait", {}).catch((e: unknown) => e);
    await server.waitStarted();
    await registry.remove("web", A);
    expect(connector.closes).toEqual([{ name: "web", scope: A }]);
    expect(client.isConnected).toBe(false);
    expect(await inFlight).toBeInstanceOf(AppError);
    expect(server.sessionsOpened - before.opened).toBe(server.sessionsClosed - before.closed);
    await expect(client.callTool("echo", { message: "x" })).rejects.toMatchObject({ code: "UNAVAILABLE" });
    // Re-adding the same name works (the reference's gateway answered 409 here).
    await registry.add(httpMcp("web", server.url, false), A);
    server.releaseWaits();
  });

  it("purgeSession and purgeAgent forget exactly the matching scopes and close their instances", async () => {
    const connector = recording();
    const { registry } = makeRegistry({ connector, defaultMcps: [httpMcp("base", server.url, true)] });
    await registry.add(httpMcp("a1", server.url, false), A);
    await registry.add(httpMcp("b1", server.url, false), B);
    await registry.add(httpMcp("c1", server.url, false), C);
    await registry.list(A);
    await registry.list(B);

    await registry.purgeSession("s1", { agentId: "agent-b" });
    expect(registry.declarations(B).map((d) => d.name)).toEqual(["base"]);
    expect(registry.declarations(A).map((d) => d.name)).toEqual(["base", "a1"]);
    expect(
      connector.closes
        .filter((c) => c.scope.agentId === "agent-b")
        .map((c) => c.name)
        .sort(),
    ).toEqual(["b1", "base"]);

    await registry.purgeAgent("agent-a");
    expect(registry.declarations(A).map((d) => d.name)).toEqual(["base"]);
    expect(registry.declarations(C).map((d) => d.name)).toEqual(["base"]);
    expect(registry.stats()).toEqual({ liveStateful: 0, live: 0, declaredScopes: 0, cap: 40 });
    expect(JSON.parse(await readMcpFile())).toEqual({ version: 2, mcps: {} });
  });

  it("purgeSession without an agent forgets that session in every agent", async () => {
    const { registry } = makeRegistry({ connector: recording() });
    await registry.add(httpMcp("a1", server.url, false), A);
    await registry.add(httpMcp("b1", server.url, false), B);
    await registry.add(httpMcp("c1", server.url, false), C);
    await registry.purgeSession("s1");
    expect(registry.declarations(A)).toEqual([]);
    expect(registry.declarations(B)).toEqual([]);
    expect(registry.declarations(C).map((d) => d.name)).toEqual(["c1"]);
  });
});
