import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import type { SandboxedFolders } from "@/server/workspace/drivers/bubblewrap/sandboxed-folders";
import {
  everythingMcp,
  filesystemMcp,
  httpMcp,
  startHttpMcpServer,
} from "../../unit/workspace/support/mcp-servers";
import {
  describeSandbox,
  hostProcessesMatching,
  pollUntil,
  sandboxDriver,
  sandboxFolders,
  specOf,
} from "./support/sandbox-env";

const SCOPE = { agentId: "agent-a", sessionId: "" };

function textOf(result: { content: Array<{ type: string; text?: unknown }> }): string {
  return result.content.map((part) => (typeof part.text === "string" ? part.text : "")).join("");
}

/**
 * stdio MCP servers of the default backend run in the workspace's sandbox (through the in-sandbox
 * gateway), and a workspace stop or purge ends them, whichever process started them (issue 9 A, E).
 */
describeSandbox("bubblewrap sandbox: stdio MCP servers", () => {
  let basedir: string;
  let dataDir: string;
  let driver: WorkspaceDriver;
  let folders: SandboxedFolders;

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-sandbox-mcp-")));
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-data-"));
    await fs.writeFile(path.join(dataDir, "secrets.json"), '{"authSecret":"s3cr3t"}', { mode: 0o600 });
    driver = sandboxDriver(basedir);
    folders = sandboxFolders(basedir);
  });

  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it("runs confined: the workspace at /workspace, no secrets, no repository, the workspace uid", async () => {
    const spec = specOf("ws-mcp-confined");
    const backend = await folders.attach(spec);
    await backend.writeFile("/workspace/hello.txt", "hello from the workspace");
    const connector = await folders.connectMcp(backend);
    const client = await connector.connect(filesystemMcp("fs", "/"), SCOPE);
    try {
      const read = (p: string) => client.callTool("read_text_file", { path: p });
      expect(textOf(await read("/workspace/hello.txt"))).toBe("hello from the workspace");
      const secrets = await read(path.join(dataDir, "secrets.json"));
      expect(secrets.isError).toBe(true);
      expect(textOf(secrets)).not.toContain("s3cr3t");
      const repo = await read(path.resolve("package.json"));
      expect(repo.isError).toBe(true);
      const other = await read(path.join(basedir, "tenant-a"));
      expect(other.isError).toBe(true);

      // The server process itself, seen from the host: the workspace uid, never root.
      const [pid] = await hostProcessesMatching("server-filesystem/dist/index.js /");
      expect(pid).toBeDefined();
      const status = await fs.readFile(`/proc/${pid}/status`, "utf8");
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      expect(uid).not.toBe(0);
      expect(uid).toBe(backend.options.identity.uid);
    } finally {
      await client.close();
      await backend.close();
    }
  });

  it("dials HTTP MCP servers from the host: the sandbox's lack of network does not cut them off", async () => {
    const upstream = await startHttpMcpServer();
    const backend = await folders.attach(specOf("ws-mcp-http"));
    try {
      // The test server listens on loopback, which the MCP network policy refuses unless allowlisted.
      const connector = await folders.connectMcp(backend, {
        network: { allowedHosts: ["127.0.0.1"] },
      });
      const client = await connector.connect(httpMcp("remote", upstream.url, true), SCOPE);
      expect(textOf(await client.callTool("echo", { message: "hi" }))).toBe("Echo: hi");
      await client.close();
    } finally {
      await backend.close();
      await upstream.close();
    }
  });

  for (const action of ["stop", "purge"] as const) {
    it(`workspace ${action} ends its MCP servers and running commands, from any process`, async () => {
      const spec = specOf(`ws-mcp-${action}`);
      const marker = `berth-${action}-${Date.now()}`;
      // "Another process" attached to the workspace: its own folders instance and gateway.
      const other = sandboxFolders(basedir);
      const backend = await other.attach(spec);
      const connector = await other.connectMcp(backend);
      const client = await connector.connect(everythingMcp("everything"), SCOPE);
      await client.listTools();
      const running = backend.exec(["/bin/sh", "-c", `sleep 600 & exec sleep 601 # ${marker}`], {
        timeoutMs: 600_000,
      });
      const uid = backend.options.identity.uid;
      const everything = await pollUntil(
        () => hostProcessesMatching("server-everything/dist/index.js", uid),
        (pids) => pids.length > 0,
      );
      expect(everything.length).toBeGreaterThan(0);
      await pollUntil(
        () => hostProcessesMatching(marker),
        (pids) => pids.length > 0,
      );

      if (action === "stop") await driver.stop(spec);
      else await driver.purge(spec);

      const result = await running;
      expect(result.exitCode).toBe(-1);
      expect(await hostProcessesMatching(marker)).toEqual([]);
      // The kernel tears the pid namespaces down right after their init was killed.
      const survivors = await pollUntil(
        () => hostProcessesMatching("server-everything/dist/index.js", uid),
        (pids) => pids.length === 0,
      );
      expect(survivors).toEqual([]);
      expect(await folders.registry.live(backend.options.key)).toEqual([]);
      if (action === "purge") await expect(fs.stat(backend.hostWorkdir)).rejects.toThrow(/ENOENT/);
      await backend.close();
      // Longer than the gateway's own 30 s start timeout: a slow start on a loaded machine must fail with
      // the gateway's reason, not with the test runner's timeout.
    }, 90_000);
  }
});
