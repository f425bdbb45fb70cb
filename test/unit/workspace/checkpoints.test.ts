import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { restoreCheckpoint } from "@/server/workspace/checkpoints/restore";
import { diffTrees, walkTree } from "@/server/workspace/checkpoints/tree";
import { makeTempMachine } from "./helpers";

const TENANT = "tenant-a";

let work: Awaited<ReturnType<typeof makeTempMachine>>;
let storeRoot: string;
let store: FolderCheckpointStore;

beforeEach(async () => {
  work = await makeTempMachine("berth-checkpoint-");
  storeRoot = await fs.mkdtemp(path.join(os.tmpdir(), "berth-checkpoint-store-"));
  store = new FolderCheckpointStore(storeRoot);
});

afterEach(async () => {
  await work.cleanup();
  await fs.rm(storeRoot, { recursive: true, force: true });
});

const write = async (relative: string, content: string, mode = 0o644) => {
  const file = path.join(work.workdir, relative);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content, { mode });
};

const capture = (previous: string | null) =>
  captureCheckpoint({ machine: work.machine, store, tenantId: TENANT, previous });
const read = (hash: string) => store.readTree(TENANT, hash);

async function filesOf(root: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for await (const entry of walkTree(read, root)) {
    if (entry.type === "file") {
      const chunks: Buffer[] = [];
      for await (const chunk of await store.readBlob(TENANT, entry.hash)) chunks.push(chunk as Buffer);
      files[entry.path] = Buffer.concat(chunks).toString();
    }
    if (entry.type === "symlink") files[entry.path] = `-> ${entry.target}`;
  }
  return files;
}

describe("checkpoints of a workdir", () => {
  it("records every file, link and folder, leaving out what Berth owns", async () => {
    await write("src/a.ts", "export const a = 1;\n");
    await write("src/deep/b.txt", "b");
    await write("run.sh", "#!/bin/sh\necho hi\n", 0o755);
    await write(".mcp", "{}");
    await write("skills/.seed/x", "seed");
    await fs.symlink("src/a.ts", path.join(work.workdir, "link"));
    await fs.mkdir(path.join(work.workdir, "empty"));
    const first = await capture(null);
    expect(await filesOf(first.root)).toEqual({
      link: "-> src/a.ts",
      "run.sh": "#!/bin/sh\necho hi\n",
      "src/a.ts": "export const a = 1;\n",
      "src/deep/b.txt": "b",
    });
    const entries: string[] = [];
    for await (const entry of walkTree(read, first.root)) entries.push(`${entry.type}:${entry.path}`);
    expect(entries).toContain("dir:empty");
    expect(entries).toContain("dir:skills");
    expect(entries).not.toContain("file:.mcp");
    expect(first.stats).toMatchObject({ files: 3, readFiles: 3, skippedFiles: 0 });
  });

  it("reads and stores only what changed since the previous checkpoint", async () => {
    for (let index = 0; index < 200; index++)
      await write(`pkg/${index % 10}/file-${index}.txt`, `content ${index}`);
    const first = await capture(null);
    expect(first.stats.readFiles).toBe(200);
    await write("pkg/3/file-3.txt", "changed");
    await write("new.txt", "new");
    await fs.rm(path.join(work.workdir, "pkg/4/file-4.txt"));
    const second = await capture(first.root);
    expect(second.stats.readFiles).toBe(2);
    // Two blobs, and the trees on their paths only: root, pkg, pkg/3 (pkg/4's tree changed too).
    expect(second.stats.storedObjects).toBe(2 + 4);
    const changes = await diffTrees(read, first.root, second.root);
    expect(changes.map((change) => `${change.kind} ${change.path}`)).toEqual([
      "added new.txt",
      "changed pkg/3/file-3.txt",
      "removed pkg/4/file-4.txt",
    ]);
    // Nothing changed: the same root, nothing stored.
    const third = await capture(second.root);
    expect(third.root).toBe(second.root);
    expect(third.stats).toMatchObject({ readFiles: 0, storedObjects: 0 });
  });

  it("stores a file that came back with the same bytes once (dedup across checkpoints)", async () => {
    await write("a.txt", "same bytes");
    const first = await capture(null);
    await fs.rm(path.join(work.workdir, "a.txt"));
    await write("b.txt", "same bytes");
    const second = await capture(first.root);
    expect(second.stats.readFiles).toBe(1);
    expect(second.stats.storedObjects).toBe(1); // the root tree only: the blob was there
  });

  it("restores a workdir an agent wrecked, writing only what differs", async () => {
    await write("src/a.ts", "a");
    await write("src/b.ts", "b");
    await write("keep.txt", "keep");
    await fs.symlink("keep.txt", path.join(work.workdir, "alias"));
    const checkpoint = await capture(null);
    await fs.rm(path.join(work.workdir, "src"), { recursive: true });
    await write("src", "a file where a folder was");
    await write("junk/deep/x", "x");
    await fs.rm(path.join(work.workdir, "alias"));
    await fs.symlink("elsewhere", path.join(work.workdir, "alias"));
    const restored = await restoreCheckpoint({
      machine: work.machine,
      store,
      tenantId: TENANT,
      root: checkpoint.root,
    });
    expect(restored).toMatchObject({ written: 3, deleted: 3 });
    const after = await capture(checkpoint.root);
    expect(await filesOf(after.root)).toEqual(await filesOf(checkpoint.root));
    expect(await fs.readFile(path.join(work.workdir, "src/b.ts"), "utf8")).toBe("b");
    await expect(fs.stat(path.join(work.workdir, "junk"))).rejects.toThrow();
    // Convergent: a second restore finds nothing to do.
    expect(
      await restoreCheckpoint({ machine: work.machine, store, tenantId: TENANT, root: checkpoint.root }),
    ).toMatchObject({ written: 0, deleted: 0 });
  });

  it("an incremental capture equals a capture from scratch, whatever changed (adds, removals, modes, types)", async () => {
    let seed = 7;
    const random = (below: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % below;
    };
    const paths = () => Array.from({ length: 12 }, (_, index) => `d${index % 3}/s${index % 2}/f${index}`);
    for (const file of paths().slice(0, 8)) await write(file, `start ${file}`);
    let previous = (await capture(null)).root;
    for (let step = 0; step < 40; step++) {
      const target = paths()[random(12)]!;
      const full = path.join(work.workdir, target);
      const folder = path.dirname(full);
      switch (random(7)) {
        case 0:
          await write(target, `step ${step}`);
          break;
        case 1:
          await fs.rm(full, { recursive: true, force: true });
          break;
        case 2:
          await fs.chmod(full, 0o700).catch(() => undefined);
          break;
        case 3:
          await fs.rm(folder, { recursive: true, force: true });
          break;
        case 4:
          await fs.rm(full, { recursive: true, force: true });
          await fs.mkdir(path.join(full, "inner"), { recursive: true });
          break;
        case 5:
          await fs.rm(full, { recursive: true, force: true });
          await fs.mkdir(folder, { recursive: true });
          await fs.symlink(`target-${step}`, full);
          break;
        default:
          await fs.chmod(folder, step % 2 ? 0o750 : 0o755).catch(() => undefined);
      }
      // Every third step from another store object over the same folder: the index comes from its trees.
      const incremental = await captureCheckpoint({
        machine: work.machine,
        store: step % 3 ? store : new FolderCheckpointStore(storeRoot),
        tenantId: TENANT,
        previous,
      });
      const scratch = await captureCheckpoint({
        machine: work.machine,
        store: new FolderCheckpointStore(path.join(storeRoot, `scratch-${step}`)),
        tenantId: TENANT,
        previous: null,
      });
      expect(incremental.root, `step ${step}`).toBe(scratch.root);
      expect(incremental.stats).toMatchObject({
        files: scratch.stats.files,
        directories: scratch.stats.directories,
        totalBytes: scratch.stats.totalBytes,
      });
      previous = incremental.root;
    }
  });

  it("keeps tenants apart and prunes only unreferenced objects past the grace time", async () => {
    await write("a.txt", "a");
    const first = await capture(null);
    await expect(store.readTree("tenant-b", first.root)).rejects.toMatchObject({ code: "NOT_FOUND" });
    await write("a.txt", "a2");
    const second = await capture(first.root);
    const keep = new Set<string>([second.root]);
    for await (const entry of walkTree(read, second.root)) if (entry.type !== "symlink") keep.add(entry.hash);
    expect(await store.prune(TENANT, keep, 60_000)).toEqual({ objects: 0, bytes: 0 });
    const swept = await store.prune(TENANT, keep, -1);
    expect(swept.objects).toBe(2); // the first root tree and the first blob
    expect(await filesOf(second.root)).toEqual({ "a.txt": "a2" });
  });
});
