import { afterAll, beforeAll, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { DockerAttacher } from "@/server/workspace/drivers/docker/docker-attacher";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import { MCP_NOT_PERSISTED } from "@/server/workspace/mcp/mcp-file";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { makeUnwritable } from "../../unit/workspace/support/unwritable-dir";
import {
  createDockerTestbed,
  describeDocker,
  libraryDockerDriver,
  TEST_OWNER,
  uniqueWorkspaceId,
} from "./support/docker-env";

/** The least MCP server that starts: answers initialize and tools/list (no tools). */
const TINY_MCP_SERVER = `require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id === undefined) return;
  const result = message.method === "initialize"
    ? { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "tiny", version: "1" } }
    : { tools: [] };
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\\n");
});`;

async function appErrorOf(call: Promise<unknown>): Promise<AppError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof AppError)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error;
}

/**
 * A declaration that fails in a container (its server exits, the workdir refuses `.mcp.lock`) is the
 * caller's 4xx naming the cause, through the gateway and its setpriv wrapper, and leaves nothing declared.
 */
describeDocker("Docker: MCP declarations that fail", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let manager: WorkspaceManager;
  let docker: DockerAttacher;
  const workspaceId = uniqueWorkspaceId("mcpfail");
  const address = { tenantId: TEST_OWNER.tenantId, userId: TEST_OWNER.userId, workspaceId };
  const scope = { agentId: TEST_OWNER.agentId, sessionId: "s1" };

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    testbed.track(address);
    docker = new DockerAttacher(testbed.newContainers());
    manager = new WorkspaceManager({
      attacher: attachThrough(libraryDockerDriver(docker)),
      evictIntervalMs: null,
      livenessIntervalMs: 0,
    });
  });
  afterAll(async () => {
    await manager?.closeAll().catch(() => undefined);
    await testbed?.cleanup();
  });

  it("names the exit code and stderr of a server that exits, then the errno of an unwritable workdir", async () => {
    const workspace = await manager.getWorkspace({ ...address, agentId: TEST_OWNER.agentId });
    await docker.handleOf(workspace.machine)!.gateway.ready;
    const exits = ZMcpDeclaration.parse({
      name: "boom",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "sh", args: ["-c", "echo boom >&2; exit 3"] },
    });
    const exited = await appErrorOf(workspace.addMcp(exits, scope));
    expect(exited).toMatchObject({
      code: "UNPROCESSABLE",
      details: { exitCode: 3, reason: "server_exited" },
    });
    expect(exited.userMessage).toMatch(/exited with code 3.*boom/);
    expect(exited.isRetryable).toBe(false);
    expect(await workspace.readMcpDeclarations(scope)).toEqual([]);

    const undo = await makeUnwritable(docker.handleOf(workspace.machine)!.hostWorkdir);
    try {
      const fine = ZMcpDeclaration.parse({
        name: "fine",
        is_stateful: true,
        mcp_config: { type: "stdio_mcp", command: "node", args: ["-e", TINY_MCP_SERVER] },
      });
      const refused = await appErrorOf(workspace.addMcp(fine, scope));
      expect(refused).toMatchObject({ code: "UNPROCESSABLE", details: { reason: MCP_NOT_PERSISTED } });
      expect(refused.userMessage).toMatch(/failed with (EACCES|EPERM|EROFS)/);
    } finally {
      await undo();
    }
    expect(await workspace.readMcpDeclarations(scope)).toEqual([]);
  });
});
