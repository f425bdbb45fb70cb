import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { DockerContainers } from "@/server/workspace/drivers/docker/docker-containers";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { createDockerTestbed, describeDocker, TEST_OWNER, testInstallationId } from "./support/docker-env";

/** A "gateway" that starts and never listens: what a broken bundle or a wedged Node looks like. */
const code = 'console.error("broken gateway: not listening"); setInterval(() => {}, 1 << 30);\n';
const brokenBundle = { code, sha256: createHash("sha256").update(code).digest("hex") };

describeDocker("a Docker workspace's commands do not wait for its gateway", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  // Long enough for Node to boot in the container and print on a loaded machine (1.5 s was not, in CI: the
  // deadline passed with the log still empty), so the failure can say what the log ends with.
  const gateway = { startTimeoutMs: 6_000 };

  beforeAll(async () => {
    testbed = await createDockerTestbed({ gateway });
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("opens, runs commands as the workspace user in its own workdir, and files fall back to exec", async () => {
    const containers = new DockerContainers(
      { ...testbed.config, gateway },
      { installationId: testInstallationId, loadGatewayBundle: () => Promise.resolve(brokenBundle) },
    );
    const ref = testbed.refFor();
    testbed.track(ref);
    const ws = await containers.open({ ...ref, agentId: TEST_OWNER.agentId });
    // The fresh workdir was handed to the workspace user before open() resolved.
    const wrote = await ws.backend.exec(["/bin/sh", "-c", "echo hi > first.txt && id -un"]);
    expect(wrote.exitCode).toBe(0);
    expect(wrote.stdout.toString()).toContain("berth");
    expect(await fs.readFile(path.join(ws.hostWorkdir, "first.txt"), "utf8")).toBe("hi\n");

    await expect(ws.gateway.ready).rejects.toMatchObject({
      code: "UNAVAILABLE",
      // The end of the log in the message as well: what a report or a test's output shows.
      message: expect.stringMatching(/did not become healthy within \d+ ms; its log ends: .*broken gateway/),
      details: { gatewayLogTail: expect.stringContaining("broken gateway") },
    });
    // MCP requests report why; file operations go through exec instead.
    const declaration = ZMcpDeclaration.parse({
      name: "everything",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "node", args: ["-e", "0"] },
    });
    await expect(
      ws.mcpConnector.connect(declaration, { agentId: "a", sessionId: "s" }),
    ).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await ws.backend.writeFile("second.txt", "by exec");
    expect(await ws.backend.stat("second.txt")).toMatchObject({ type: "file", size: 7 });

    // A worker's provision is a working workspace or a failure: it waits for the gateway.
    const machine = new DockerMachines(
      { ...testbed.config, gateway },
      { installationId: testInstallationId, loadGatewayBundle: () => Promise.resolve(brokenBundle) },
    );
    await expect(
      machine.create({ ...ref, agentId: TEST_OWNER.agentId, isolation: "per_agent" }),
    ).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });
});
