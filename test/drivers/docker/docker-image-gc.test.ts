import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

// Every change of Berth's gateway or of the image config makes a new hash-tagged workspace image and leaves
// the old one behind. The test uses a repository of its own, so pruning never touches the images other
// test files build at the same time.
describeDocker("Docker workspace images: unused ones of an earlier config are pruned", () => {
  const repository = `berth-gc-test-${randomBytes(4).toString("hex")}`;
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;

  beforeAll(async () => {
    testbed = await createDockerTestbed({ imageRepository: repository });
  });
  afterAll(async () => {
    await testbed?.cleanup();
    const leftovers = await testbed?.docker.listImages({ filters: { reference: [repository] } });
    for (const image of leftovers ?? []) {
      for (const tag of image.RepoTags ?? [])
        await testbed.docker
          .getImage(tag)
          .remove()
          .catch(() => undefined);
    }
  });

  const tagsOf = async () =>
    (await testbed.docker.listImages({ filters: { reference: [repository] } }))
      .flatMap((image) => image.RepoTags ?? [])
      .sort();
  const imageOf = async (container: { inspect(): Promise<{ Config: { Image: string } }> }) =>
    (await container.inspect()).Config.Image;

  it("keeps the current image, images a container uses and young ones; removes the rest", async () => {
    // An "earlier config" (another uid renders another Dockerfile, so another tag) with a workspace on it.
    const earlierProvider = testbed.newContainers({ uid: 1001, gid: 1001 });
    const earlierRef = testbed.refFor();
    const earlier = await testbed.open(earlierProvider, earlierRef);
    const earlierTag = await imageOf(earlier.backend.container);
    await earlier.close(); // stopped, not removed: a stopped workspace restarts on its own image

    const containers = testbed.newContainers();
    const current = await testbed.open(containers);
    const currentTag = await imageOf(current.backend.container);
    expect(currentTag).not.toBe(earlierTag);
    expect(await tagsOf()).toEqual([currentTag, earlierTag].sort());

    // A stopped container still uses the earlier image: kept.
    expect(await containers.pruneImages({ minAgeMs: 0 })).toEqual([]);

    await earlierProvider.purge(earlierRef);
    // Too young to go (it may be about to get a container), and a dry run removes nothing.
    expect(await containers.pruneImages({ minAgeMs: 24 * 60 * 60_000 })).toEqual([]);
    expect(await containers.pruneImages({ minAgeMs: 0, dryRun: true })).toEqual([earlierTag]);
    expect(await tagsOf()).toEqual([currentTag, earlierTag].sort());

    expect(await containers.pruneImages({ minAgeMs: 0 })).toEqual([earlierTag]);
    expect(await tagsOf()).toEqual([currentTag]);
    // The current image stays even with no container on it.
    await containers.purge(current.ref);
    expect(await containers.pruneImages({ minAgeMs: 0 })).toEqual([]);
    expect(await tagsOf()).toEqual([currentTag]);
  });
});
