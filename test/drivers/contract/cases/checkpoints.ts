import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import tar from "tar-stream";
import { afterAll, expect } from "vitest";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import { type CheckpointStore, FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { restoreCheckpoint } from "@/server/workspace/checkpoints/restore";
import { walkTree } from "@/server/workspace/checkpoints/tree";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { ContractContext } from "../backend-contract";
import { sha256 } from "../support";

const TENANT = "contract";
const UNICODE = "work/docs/read me ünïcødé ☃.md";
const BINARY = Buffer.concat([Buffer.from([0, 255, 0, 254, 13, 10]), randomBytes(64 * 1024)]);
/** The work folder of the first checkpoint: nested folders, an executable, an empty and a binary file. */
const FILES: ReadonlyArray<{ path: string; data: Buffer; mode?: number }> = [
  { path: "work/src/app/main.ts", data: Buffer.from("export const main = 1;\n") },
  { path: "work/src/app/util/deep/leaf.txt", data: Buffer.from("leaf\n") },
  { path: UNICODE, data: Buffer.from("# héllo wörld\n") },
  { path: "work/empty.txt", data: Buffer.alloc(0) },
  { path: "work/bin/run.sh", data: Buffer.from("#!/bin/sh\necho ran\n"), mode: 0o755 },
  { path: "work/data/blob.bin", data: BINARY },
  // Modes a umask of 022 would not give: a restore must set them, not leave them to the umask.
  { path: "work/data/shared.txt", data: Buffer.from("group writable\n"), mode: 0o664 },
  { path: "work/data/secret.txt", data: Buffer.from("owner only\n"), mode: 0o600 },
  ...Array.from({ length: 24 }, (_, index) => ({
    path: `work/pkg/m${index % 4}/file-${index}.txt`,
    data: Buffer.from(`filler ${index}\n`),
  })),
];
const LINKS = { "work/current": "src/app/main.ts", "work/dangling": "nowhere/at/all" } as const;

type Snapshot = Record<string, string>;

/**
 * Turn checkpoints (issue 24) on the driver's own machine: captureCheckpoint's stat walk and reads, and
 * restoreCheckpoint's convergent writes through `putArchive`, checked against what `getArchive` shows.
 * One workspace of its own (the suite's main one holds other cases' files), made by the first case.
 */
export function registerCheckpointCases(context: ContractContext): void {
  let storeRoot = "";
  let prepared: Promise<{
    machine: WorkspaceMachine;
    store: FolderCheckpointStore;
    first: Awaited<ReturnType<typeof captureCheckpoint>>;
    snapshot: Snapshot;
  }> | null = null;
  const prepare = () =>
    (prepared ??= (async () => {
      const spec = context.newSpec("ckpt");
      const handle = await context.driver.create(spec);
      const machine = await context.driver.attach({ ...spec, handle });
      storeRoot = await fs.mkdtemp(path.join(os.tmpdir(), "berth-contract-checkpoints-"));
      const store = new FolderCheckpointStore(storeRoot);
      for (const file of FILES) {
        await machine.writeFile(file.path, file.data);
        if (file.mode) await ok(machine, ["chmod", file.mode.toString(8), file.path]);
      }
      await machine.mkdir("work/empty-dir");
      await ok(machine, ["chmod", "775", "work/empty-dir"]);
      for (const [link, target] of Object.entries(LINKS)) await ok(machine, ["ln", "-s", target, link]);
      const snapshot = await snapshotOf(machine, "work");
      const first = await captureCheckpoint({ machine, store, tenantId: TENANT, previous: null });
      return { machine, store, first, snapshot };
    })());
  afterAll(async () => {
    const ready = await prepared?.catch(() => null);
    await ready?.machine.close().catch(() => undefined);
    if (storeRoot) await fs.rm(storeRoot, { recursive: true, force: true });
  });

  const restore = async (root: string, store?: CheckpointStore, signal?: AbortSignal) => {
    const { machine, store: own } = await prepare();
    return restoreCheckpoint({
      machine,
      store: store ?? own,
      tenantId: TENANT,
      root,
      ...(signal ? { signal } : {}),
    });
  };
  /** The workdir is exactly the first checkpoint again: same bytes, modes and links, same root hash. */
  const expectFirstTree = async () => {
    const { machine, store, first, snapshot } = await prepare();
    expect(await snapshotOf(machine, "work")).toEqual(snapshot);
    const again = await captureCheckpoint({ machine, store, tenantId: TENANT, previous: first.root });
    expect(again.root).toBe(first.root);
    expect(again.stats.readFiles).toBe(0);
  };

  context.it(
    "checkpoints: a capture records nested folders, links, modes, empty, binary and unicode-named files",
    async () => {
      const { store, first, snapshot } = await prepare();
      const entries = new Map<string, string>();
      for await (const entry of walkTree((hash) => store.readTree(TENANT, hash), first.root)) {
        if (!entry.path.startsWith("work/") && entry.path !== "work") continue;
        entries.set(
          entry.path,
          entry.type === "file"
            ? `file ${entry.mode.toString(8)} ${entry.size} ${entry.hash}`
            : entry.type === "symlink"
              ? `-> ${entry.target}`
              : `dir ${(entry.mode & 0o777).toString(8)}`, // a volume may add setgid (fsGroup)
        );
      }
      for (const file of FILES) {
        const mode = (file.mode ?? 0o644).toString(8);
        expect(entries.get(file.path), file.path).toBe(
          `file ${mode} ${file.data.length} ${sha256(file.data)}`,
        );
      }
      for (const [link, target] of Object.entries(LINKS)) expect(entries.get(link)).toBe(`-> ${target}`);
      for (const dir of ["work/src/app/util/deep", "work/docs"]) expect(entries.get(dir)).toBe("dir 755");
      expect(entries.get("work/empty-dir")).toBe("dir 775");
      // The capture read every file once, and its blobs are the machine's bytes.
      expect(first.stats.readFiles).toBe(first.stats.files);
      expect(first.stats.skippedFiles).toBe(0);
      expect(snapshot[UNICODE]).toBe(`file 644 ${sha256(FILES[2]!.data)}`);
    },
  );

  context.it(
    "checkpoints: a capture after 3 changed files reads only those and stores their blobs once",
    async () => {
      const { machine, store, first } = await prepare();
      const base = await captureCheckpoint({ machine, store, tenantId: TENANT, previous: first.root });
      expect(base.stats).toMatchObject({ readFiles: 0, storedObjects: 0 });
      await machine.writeFile("work/src/app/util/deep/leaf.txt", "leaf, edited\n");
      // Same size, new bytes: only the mtime tells the walk it changed.
      await machine.writeFile("work/data/blob.bin", randomBytes(BINARY.length));
      // Now the same bytes as a file the store already holds: read, but deduplicated.
      await machine.writeFile(UNICODE, FILES[FILES.length - 1]!.data);
      const second = await captureCheckpoint({ machine, store, tenantId: TENANT, previous: base.root });
      expect(second.stats.readFiles).toBe(3);
      // Two new blobs, and the trees on the changed paths: root, work, src, app, util, deep, data, docs.
      expect(second.stats.storedObjects).toBe(2 + 8);
      expect(second.stats.storedBytes).toBeLessThan(BINARY.length + 16 * 1024);
      expect(second.stats.files).toBe(base.stats.files);
    },
  );

  context.it(
    "checkpoints: restore brings back the first tree after rm -rf and edits, deleting what was added",
    async () => {
      const { machine, first } = await prepare();
      await ok(machine, ["rm", "-rf", "work/src"]);
      await machine.writeFile("work/bin/run.sh", "#!/bin/sh\necho changed\n", { mode: 0o644 });
      await machine.writeFile("work/added.txt", "added since");
      await machine.writeFile("work/new-dir/inner/x.txt", "x");
      await ok(machine, ["ln", "-sfn", "elsewhere", "work/current"]);
      await ok(machine, ["chmod", "700", "work/docs"]);
      await ok(machine, ["rm", "-f", "work/empty.txt"]);
      await ok(machine, ["rm", "-f", "work/data/secret.txt"]);
      await ok(machine, ["chmod", "644", "work/data/shared.txt"]);
      const restored = await restore(first.root);
      expect(restored.deleted).toBeGreaterThanOrEqual(3);
      expect(restored.written).toBeGreaterThanOrEqual(5);
      await expectFirstTree();
      expect(await machine.stat("work/added.txt")).toBeNull();
      expect(await machine.stat("work/new-dir")).toBeNull();
      // What came back belongs to the workspace user: the agent goes on editing it.
      await ok(machine, [
        "sh",
        "-c",
        "echo more >> work/src/app/main.ts && touch work/src/app/util/after && rm work/src/app/util/after",
      ]);
    },
  );

  context.it("checkpoints: restore is convergent: a second run writes and deletes nothing", async () => {
    const { first } = await prepare();
    await restore(first.root);
    expect(await restore(first.root)).toMatchObject({ written: 0, deleted: 0 });
    await expectFirstTree();
  });

  context.it("checkpoints: a restore aborted or failing mid-way, run again, converges", async () => {
    const { machine, store, first } = await prepare();
    const wreck = async () => {
      await ok(machine, ["rm", "-rf", "work/src", "work/pkg", "work/data"]);
      await machine.writeFile("work/junk.txt", "junk");
    };
    // Aborted while the tar stream is being written (after the 5th blob is read).
    await wreck();
    const controller = new AbortController();
    await expect(
      restore(
        first.root,
        interruptedStore(store, 5, () => controller.abort()),
        controller.signal,
      ),
    ).rejects.toThrow();
    expect(await restore(first.root)).toMatchObject({ deleted: 0 });
    await expectFirstTree();
    // A store that fails on the 5th blob.
    await wreck();
    await expect(
      restore(
        first.root,
        interruptedStore(store, 5, () => {
          throw new Error("forced failure");
        }),
      ),
    ).rejects.toThrow();
    await restore(first.root);
    await expectFirstTree();
    expect(await restore(first.root)).toMatchObject({ written: 0, deleted: 0 });
  });
}

/** The store, except that its `count`th blob read first runs `interrupt` (which may throw). */
function interruptedStore(store: CheckpointStore, count: number, interrupt: () => void): CheckpointStore {
  let reads = 0;
  return {
    putBlob: (tenant, data) => store.putBlob(tenant, data),
    putTree: (tenant, hash, bytes) => store.putTree(tenant, hash, bytes),
    readTree: (tenant, hash) => store.readTree(tenant, hash),
    prune: (tenant, keep, graceMs) => store.prune(tenant, keep, graceMs),
    dropTenant: (tenant) => store.dropTenant(tenant),
    async readBlob(tenant, hash) {
      reads += 1;
      if (reads === count) interrupt();
      return store.readBlob(tenant, hash);
    },
  };
}

async function ok(machine: WorkspaceMachine, argv: string[]): Promise<void> {
  const result = await machine.exec(argv);
  expect(result.exitCode, `${argv.join(" ")}: ${result.stderr.toString()}`).toBe(0);
}

/** `dir` as the machine's own tar shows it: per path its type, permission bits and bytes or link target. */
async function snapshotOf(machine: WorkspaceMachine, dir: string): Promise<Snapshot> {
  const snapshot: Snapshot = {};
  const extract = tar.extract();
  extract.on("entry", (header, stream, next) => {
    const name = header.name.replace(/\/$/, "");
    const mode = ((header.mode ?? 0) & 0o7777).toString(8);
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
    stream.on("end", () => {
      snapshot[name] =
        header.type === "symlink"
          ? `-> ${header.linkname}`
          : header.type === "directory"
            ? `dir ${mode}`
            : `${header.type} ${mode} ${sha256(Buffer.concat(chunks))}`;
      next();
    });
  });
  await pipeline(await machine.getArchive(dir), extract);
  return snapshot;
}
