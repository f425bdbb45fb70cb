import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import type { DockerWorkspaceRef } from "@/server/workspace/drivers/docker/docker-config";
import { ZMcpDeclaration, type LiveMcpClient, type TMcpDeclaration } from "@/server/workspace/mcp/types";
import { copyPackageClosure, createDockerTestbed, describeDocker, TEST_OWNER } from "./support/docker-env";

// Two host processes attached to one workspace container (an API replica and a worker, or a process and
// its restart) reach the same gateway, so they must share its MCP servers rather than restart them under
// each other. `toggle-simulated-logging` of server-everything is per-instance state: it answers "Started"
// on a fresh server and "Stopped" on the second call to the same one.
describeDocker("MCP servers in a container are shared by the host processes attached to it", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ref: DockerWorkspaceRef;
  let first: DockerWorkspaceHandle;
  let second: DockerWorkspaceHandle;
  let declaration: TMcpDeclaration;
  const scope = { agentId: "agent-1", sessionId: "session-1" };

  /** A process attaching to the running workspace as the engine does (the gateway's token is reused). */
  const attach = () =>
    testbed.newContainers().open({ ...ref, agentId: TEST_OWNER.agentId, reuseToken: true });
  const toggle = async (client: LiveMcpClient) =>
    JSON.stringify((await client.callTool("toggle-simulated-logging", {})).content);
  const serversRunning = async () => {
    const ps = await first.backend.exec(["ps", "-eo", "args"]);
    return ps.stdout
      .toString()
      .split("\n")
      .filter((line) => line.includes("server-everything") && !line.includes("ps -eo")).length;
  };

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ref = testbed.refFor();
    testbed.track(ref);
    first = await attach();
    second = await attach();
    const packageDir = await copyPackageClosure(
      "@modelcontextprotocol/server-everything",
      path.join(first.hostWorkdir, ".fixtures"),
    );
    const script = path.posix.join(
      "/workspace",
      path.relative(first.hostWorkdir, packageDir),
      "dist/index.js",
    );
    declaration = ZMcpDeclaration.parse({
      name: "everything",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
    });
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("a second process adopts the running server; letting go keeps it; closing stops it", async () => {
    expect(second.gateway.instanceNonce).toBe(first.gateway.instanceNonce);
    const one = await first.mcpConnector.connect(declaration, scope);
    expect(await toggle(one)).toContain("Started");

    const two = await second.mcpConnector.connect(declaration, scope);
    expect(await toggle(two)).toContain("Stopped"); // the same server: its state carried over
    expect(await serversRunning()).toBe(1);

    await one.release?.();
    expect(await toggle(two)).toContain("Started");
    expect(await serversRunning()).toBe(1);

    await two.close();
    expect(await serversRunning()).toBe(0);
    // Connected again: a fresh server.
    const three = await first.mcpConnector.connect(declaration, scope);
    expect(await toggle(three)).toContain("Started");
    await three.close();
  });
});
