import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AppError } from "@/server/shared/errors";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { MCP_NOT_PERSISTED, readMcpFile } from "@/server/workspace/mcp/mcp-file";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { McpRegistry } from "@/server/workspace/mcp/mcp-registry";
import { silentLogger, type McpScope, type TMcpDeclaration } from "@/server/workspace/mcp/types";
import { httpMcp, startHttpMcpServer, type TestHttpMcpServer } from "./support/mcp-servers";
import { makeUnwritable } from "./support/unwritable-dir";

const SCOPE: McpScope = { agentId: "agent", sessionId: "s1" };

/**
 * Several McpRegistry objects over one workdir stand for several processes attached to one workspace (API
 * replicas, a worker): they share nothing but `.mcp`, exactly as separate processes do.
 */
describe("MCP declarations across processes sharing one workspace", () => {
  let upstream: TestHttpMcpServer;
  let workdir: string;
  let registries: McpRegistry[] = [];

  const processAttached = async (defaultMcps: TMcpDeclaration[] = []) => {
    const registry = new McpRegistry({
      connector: new LocalMcpConnector({ defaultCallTimeoutMs: 20_000 }),
      persistence: { machine: new HostFolderMachine({ workdir }) },
      defaultMcps,
    });
    await registry.restore();
    registries.push(registry);
    return registry;
  };
  const names = async (registry: McpRegistry, scope = SCOPE) =>
    (await registry.list(scope)).map((client) => client.declaration.name);

  beforeAll(async () => {
    upstream = await startHttpMcpServer();
  });
  afterAll(async () => {
    await upstream?.close();
  });
  beforeEach(async () => {
    workdir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mcp-multi-")));
  });
  afterEach(async () => {
    await Promise.all(registries.map((registry) => registry.closeAll()));
    registries = [];
    await fs.rm(workdir, { recursive: true, force: true });
  });

  it("an MCP added in one process is listed by another that initialised before", async () => {
    const one = await processAttached();
    const two = await processAttached();
    expect(await names(two)).toEqual([]);

    await one.add(httpMcp("search", upstream.url, true), SCOPE);
    expect(await names(two)).toEqual(["search"]);
    const [client] = await two.list(SCOPE);
    const result = await client!.callTool("echo", { message: "seen" });
    expect(result.content[0]?.text).toBe("Echo: seen");
  });

  it("an MCP removed in one process stops being offered by another, which closes its instance", async () => {
    const one = await processAttached();
    const two = await processAttached();
    await one.add(httpMcp("doomed", upstream.url, true), SCOPE);
    expect(await names(two)).toEqual(["doomed"]);
    const closed = upstream.sessionsClosed;

    await one.remove("doomed", SCOPE);
    expect(upstream.sessionsClosed).toBe(closed + 1); // one's instance
    expect(await names(two)).toEqual([]);
    await registries[1]!.closeAll(); // let the tracked close of two's instance finish
    expect(upstream.sessionsClosed).toBe(closed + 2);
  });

  it("changes made one after the other in two processes both survive in .mcp", async () => {
    const one = await processAttached();
    const two = await processAttached();
    await one.add(httpMcp("first", upstream.url, false), SCOPE);
    // `two` has not listed since `one` wrote: its add must build on the file, not on its stale view.
    await two.add(httpMcp("second", upstream.url, false), SCOPE);
    await one.remove("first", SCOPE);
    await two.add(httpMcp("third", upstream.url, false), { agentId: "agent", sessionId: "s2" });

    const onDisk = await readMcpFile(new HostFolderMachine({ workdir }), ".mcp", silentLogger);
    expect(
      [...onDisk.values()].map(({ scope, declarations }) => [scope, declarations.map((d) => d.name)]),
    ).toEqual([
      [SCOPE, ["second"]],
      [{ agentId: "agent", sessionId: "s2" }, ["third"]],
    ]);
    const three = await processAttached();
    expect(await names(three)).toEqual(["second"]);
    expect(await names(one, { agentId: "agent", sessionId: "s2" })).toEqual(["third"]);
  });

  it("concurrent changes from several processes all land in .mcp (no lost update)", async () => {
    const processes = await Promise.all([processAttached(), processAttached(), processAttached()]);
    const names = Array.from({ length: 24 }, (_, index) => `mcp${index}`);
    await Promise.all(
      names.map((name, index) =>
        processes[index % processes.length]!.add(httpMcp(name, upstream.url, false), {
          agentId: "agent",
          sessionId: `s${index % 4}`,
        }),
      ),
    );
    const onDisk = await readMcpFile(new HostFolderMachine({ workdir }), ".mcp", silentLogger);
    const declared = [...onDisk.values()].flatMap(({ declarations }) => declarations.map((d) => d.name));
    expect(declared.sort()).toEqual([...names].sort());
  });

  it("a reset in another process (.mcp deleted) gives every scope the defaults again", async () => {
    const defaults = [httpMcp("default", upstream.url, false)];
    const one = await processAttached(defaults);
    await one.add(httpMcp("extra", upstream.url, false), SCOPE);
    await one.remove("default", SCOPE);
    expect(await names(one)).toEqual(["extra"]);

    await fs.rm(path.join(workdir, ".mcp"));
    expect(await names(one)).toEqual(["default"]);
  });

  // Issue 11: with a read-only workdir `workspace.mcp.add` answered success while nothing was written; one
  // replica listed the server, the other did not, and a restart would have lost it.
  it("a change the workdir does not take is an error, and no process declares it", async () => {
    const one = await processAttached();
    const two = await processAttached();
    await one.add(httpMcp("kept", upstream.url, true), SCOPE);
    const undo = await makeUnwritable(workdir);
    try {
      const added = one.add(httpMcp("lost", upstream.url, true), SCOPE);
      // The workdir refuses writes (EACCES, or EPERM for root's immutable directory): the caller hears
      // why, as a 4xx a retry cannot fix, not as a masked, retryable 503.
      const refused = await added.then(
        () => null,
        (error: unknown) => error as AppError,
      );
      expect(refused).toMatchObject({
        code: "UNPROCESSABLE",
        details: { reason: MCP_NOT_PERSISTED, file: ".mcp.lock" },
      });
      expect(refused?.isRetryable).toBe(false);
      expect(refused?.userMessage).toMatch(/writing \.mcp\.lock failed with (EACCES|EPERM)/);
      await expect(one.remove("kept", SCOPE)).rejects.toMatchObject({
        details: { reason: MCP_NOT_PERSISTED },
      });
      expect(await names(one)).toEqual(["kept"]);
      expect(await names(two)).toEqual(["kept"]);
    } finally {
      await undo();
    }
    const restarted = await processAttached();
    expect(await names(restarted)).toEqual(["kept"]);
  });
});
