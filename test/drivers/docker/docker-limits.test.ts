import { afterAll, beforeAll, expect, it } from "vitest";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

describeDocker("Docker workspace limits: runaway commands are contained", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;

  beforeAll(async () => {
    testbed = await createDockerTestbed({ memoryBytes: 256 * 1024 * 1024, pidsLimit: 128 });
    ws = await testbed.open(testbed.newContainers());
    // open() resolves once commands can run, before the gateway has booted. A fork bomb that takes every pid
    // while Node is still starting leaves a gateway that never listens (its start fails after 30 s): the
    // cases here are about a workspace that was working when the runaway command started.
    await ws.gateway.ready;
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  const stillHealthy = async () => {
    const echo = await ws.backend.exec(["echo", "alive"]);
    expect(echo.stdout.toString()).toBe("alive\n");
    expect(await ws.isAlive()).toBe(true);
    expect(await ws.gateway.client.isHealthy(ws.gateway.instanceNonce)).toBe(true);
  };

  it("a fork bomb hits the pids limit, is killed on timeout, and the workspace keeps working", async () => {
    // The shell forks once (`bomb &`, while pids are plentiful) and then execs: a shell that forks again
    // races the bomb for a free pid and, under load, loses: dash exits on a failed fork, the command ends
    // early, and the bomb is left holding the pids limit.
    // The bomb reaches the limit in well under a second; until the timeout it keeps the container's CPU busy.
    const result = await ws.backend.exec(["sh", "-c", "bomb() { bomb | bomb & }; bomb & exec sleep 600"], {
      timeoutMs: 2_500,
    });
    expect(result.timedOut).toBe(true);
    // The limit was hit: forks started failing inside the container, not on the host.
    expect(result.stderr.toString()).toMatch(/Cannot fork|Resource temporarily unavailable/);
    const ps = await ws.backend.exec(["ps", "-e", "-o", "pid="]);
    expect(ps.stdout.toString().trim().split("\n").length).toBeLessThan(20);
    await stillHealthy();
  });

  it("a memory hog is OOM-killed inside the container (exit 137) without taking the workspace down", async () => {
    // tail buffers its whole input while looking for newlines: /dev/zero has none.
    const result = await ws.backend.exec(["sh", "-c", "head -c 2000M /dev/zero | tail"], {
      timeoutMs: 120_000,
    });
    expect(result.timedOut).toBe(false);
    expect(result.exitCode).toBe(137);
    const info = await ws.backend.container.inspect();
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(info.HostConfig.MemorySwap).toBe(256 * 1024 * 1024);
    await stillHealthy();
  });
});
