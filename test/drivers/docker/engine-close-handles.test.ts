import { spawn } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { createDockerTestbed, describeDocker, TEST_OWNER, uniqueWorkspaceId } from "./support/docker-env";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");

/**
 * A process that used a Docker workspace and closed it (engine.close(), then stop and purge) must hold
 * nothing open towards the Docker daemon or the gateway: it exits on its own. `npm run bench` used to stay
 * alive about four minutes after printing, one daemon connection per gateway launch (the detached exec's
 * answer, never read).
 */
describeDocker("closing a Docker-backed engine releases every connection", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  const workspaceId = uniqueWorkspaceId("close");

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    testbed.track({ ...TEST_OWNER, workspaceId });
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("the process exits by itself once the workspace is closed, with no socket left open", async () => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "test/drivers/docker/support/engine-close-child.ts",
        testbed.dataRoot,
        testbed.config.runtimeRoot ?? "",
        workspaceId,
      ],
      { cwd: REPO_ROOT, env: process.env, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    try {
      await vi.waitFor(
        () => {
          if (child.exitCode !== null && !output.includes("closed;"))
            throw new Error(`child failed (${child.exitCode}):\n${output}`);
          expect(output).toContain("closed;");
        },
        { timeout: 150_000, interval: 200 },
      );
      expect(output).toContain("closed; open sockets: 0");
      // Nothing keeps the event loop alive: the exit follows within seconds, not minutes.
      await vi.waitFor(() => expect(child.exitCode).not.toBeNull(), { timeout: 20_000, interval: 100 });
      expect(child.exitCode, output).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
