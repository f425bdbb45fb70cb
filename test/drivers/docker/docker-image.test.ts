import { afterAll, beforeAll, expect, it } from "vitest";
import type { DockerCreateEvent } from "@/server/workspace/drivers/docker/docker-containers";
import { createDockerTestbed, describeDocker, TEST_OWNER } from "./support/docker-env";

// The workspace image = base image + what Berth needs + the configured extra Debian packages. Extra
// packages are the one build step that needs the network (apt over the build's "host" network); the
// workspace container itself still runs with network "none".
describeDocker("Docker workspace image: extra packages, hash tag, progress", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;

  beforeAll(async () => {
    testbed = await createDockerTestbed({ extraPackages: ["jq"] });
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("builds the configured extra packages into a hash-tagged image once, reporting progress", async () => {
    const events: DockerCreateEvent[] = [];
    const ref = testbed.refFor();
    testbed.track(ref);
    const ws = await testbed
      .newContainers()
      .open({ ...ref, agentId: TEST_OWNER.agentId, onProgress: (event) => events.push(event) });

    const jq = await ws.backend.exec(["jq", "--version"]);
    expect(jq.exitCode).toBe(0);
    expect(jq.stdout.toString()).toMatch(/^jq-/);
    const info = await ws.backend.container.inspect();
    expect(info.HostConfig.NetworkMode).toBe("none");
    expect(info.Config.Image).toMatch(/^berth-workspace:[0-9a-f]+$/);

    // Commands run as soon as the container does; the gateway reports ready beside them.
    await ws.gateway.ready;
    const image = events.filter((event) => event.type === "image");
    expect(image.at(-1)).toMatchObject({ type: "image", tag: info.Config.Image });
    expect(["built", "cached"]).toContain((image.at(-1) as { phase: string }).phase);
    expect(
      events.map((event) => (event.type === "image" ? "image" : `${event.type}:${event.state}`)),
    ).toEqual(expect.arrayContaining(["container:created", "gateway:starting", "gateway:ready"]));

    // Same inputs → same tag, no rebuild.
    const again: DockerCreateEvent[] = [];
    const second = testbed.refFor();
    testbed.track(second);
    const ws2 = await testbed
      .newContainers()
      .open({ ...second, agentId: TEST_OWNER.agentId, onProgress: (event) => again.push(event) });
    expect((await ws2.backend.container.inspect()).Config.Image).toBe(info.Config.Image);
    expect(again.filter((event) => event.type === "image").map((event) => event.phase)).toEqual(["cached"]);
  });
});
