import { afterAll, beforeAll, expect, it } from "vitest";
import { createDockerTestbed, describeDocker, TEST_OWNER } from "./support/docker-env";

describeDocker("Docker backend: a tenant's per-workspace quotas", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;

  beforeAll(async () => {
    testbed = await createDockerTestbed();
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("lowers the container's CPU and memory limits to the quota, and never raises them above the config", async () => {
    const containers = testbed.newContainers();
    const open = async (resources: { cpus: number; memoryBytes: number }) => {
      const ref = testbed.refFor();
      testbed.track(ref);
      const handle = await containers.open({ ...ref, agentId: TEST_OWNER.agentId, resources });
      return (await handle.backend.container.inspect()).HostConfig;
    };
    const lowered = await open({ cpus: 0.5, memoryBytes: 256 * 1024 * 1024 });
    expect([lowered.NanoCpus, lowered.Memory, lowered.MemorySwap]).toEqual([
      0.5e9,
      256 * 1024 * 1024,
      256 * 1024 * 1024,
    ]);
    // The testbed's config: 1 CPU, 512 MiB. A quota above it leaves the config's limits.
    const capped = await open({ cpus: 4, memoryBytes: 4 * 1024 ** 3 });
    expect([capped.NanoCpus, capped.Memory]).toEqual([1e9, 512 * 1024 * 1024]);
  });

  it("an attach that knows no quotas (an API process) reuses the worker's limited container", async () => {
    const ref = testbed.refFor();
    testbed.track(ref);
    const worker = await testbed
      .newContainers()
      .open({ ...ref, agentId: TEST_OWNER.agentId, resources: { cpus: 0.5 } });
    const before = await worker.backend.container.inspect();
    const api = await testbed.newContainers().open({ ...ref, agentId: TEST_OWNER.agentId, reuseToken: true });
    const after = await api.backend.container.inspect();
    expect(after.Id).toBe(before.Id);
    expect(after.HostConfig.NanoCpus).toBe(0.5e9);
  });
});
