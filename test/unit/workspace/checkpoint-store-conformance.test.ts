import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CheckpointStore, FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { S3CheckpointStore } from "@/server/workspace/checkpoints/s3-checkpoint-store";
import { encodeTree } from "@/server/workspace/checkpoints/tree";
import { type LocalS3Server, startLocalS3Server } from "@/test/fixtures/s3-server/s3-server";

/**
 * The CheckpointStore contract, run unchanged against every store: the folder one and the S3 one (against a
 * real S3 server, npm's s3rver on loopback). A new store passes these before the engine may pick it.
 */
type Subject = {
  store: CheckpointStore;
  /** Files left in the store's local scratch space (temporary files of puts). */
  scratchFiles(): Promise<string[]>;
};

let scratch: string;
let s3: LocalS3Server;
const s3Stores: S3CheckpointStore[] = [];
let installations = 0;

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), "berth-ckpt-conformance-"));
  s3 = await startLocalS3Server();
});

afterAll(async () => {
  for (const store of s3Stores) store.close();
  await s3?.stop();
  await fs.rm(scratch, { recursive: true, force: true });
});

const SUBJECTS: Record<string, () => Subject> = {
  folder: () => {
    const root = path.join(scratch, `folder-${++installations}`);
    return {
      store: new FolderCheckpointStore(root),
      scratchFiles: () => filesUnder(root, (file) => file.split(path.sep).includes("incoming")),
    };
  },
  s3: () => {
    const spoolDir = path.join(scratch, `spool-${++installations}`);
    const store = new S3CheckpointStore({
      bucket: s3.bucket,
      region: "us-east-1",
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: s3.credentials,
      // Each installation its own key space in the one bucket, as BERTH_CHECKPOINT_S3_PREFIX gives.
      prefix: `installation-${installations}/`,
      spoolDir,
      // A few keys per page, so prune and dropTenant cross several pages and delete batches.
      pageSize: 4,
    });
    s3Stores.push(store);
    return { store, scratchFiles: () => filesUnder(spoolDir, () => true) };
  },
};

describe.each(Object.keys(SUBJECTS))("CheckpointStore conformance: %s", (name) => {
  const make = () => SUBJECTS[name]!();

  it("stores a blob under its SHA-256 and reads the same bytes back", async () => {
    const { store } = make();
    const put = await store.putBlob("tenant-a", Readable.from([Buffer.from("hello "), "world"]));
    expect(put).toEqual({ hash: sha256("hello world"), size: 11, stored: true });
    expect(await text(await store.readBlob("tenant-a", put.hash))).toBe("hello world");
    const empty = await store.putBlob("tenant-a", Readable.from([]));
    expect(empty).toEqual({ hash: sha256(""), size: 0, stored: true });
    expect(await text(await store.readBlob("tenant-a", empty.hash))).toBe("");
  });

  it("stores an object once: the same bytes again write nothing (dedup)", async () => {
    const { store } = make();
    const first = await store.putBlob("tenant-a", Readable.from([Buffer.from("same")]));
    const second = await store.putBlob("tenant-a", Readable.from([Buffer.from("sa"), Buffer.from("me")]));
    expect(second).toEqual({ ...first, stored: false });
    const tree = encodeTree([
      { name: "f", type: "file", mode: 0o644, size: 4, mtimeMs: 1, hash: first.hash },
    ]);
    expect(await store.putTree("tenant-a", tree.hash, tree.bytes)).toBe(true);
    expect(await store.putTree("tenant-a", tree.hash, tree.bytes)).toBe(false);
  });

  it("streams a blob larger than memory buffering allows, and dedups it without leftovers", async () => {
    const subject = make();
    const { store } = subject;
    const chunkSize = 256 * 1024;
    const chunks = 40; // 10 MiB: past the S3 store's in-memory limit, so spooled and sent in parts
    const data = () =>
      Readable.from(
        (function* () {
          for (let index = 0; index < chunks; index++) yield Buffer.alloc(chunkSize, index);
        })(),
      );
    const expected = createHash("sha256");
    for (let index = 0; index < chunks; index++) expected.update(Buffer.alloc(chunkSize, index));
    const put = await store.putBlob("tenant-a", data());
    expect(put).toEqual({ hash: expected.digest("hex"), size: chunks * chunkSize, stored: true });
    expect(await store.putBlob("tenant-a", data())).toEqual({ ...put, stored: false });
    const back = createHash("sha256");
    let size = 0;
    for await (const piece of await store.readBlob("tenant-a", put.hash)) {
      back.update(piece as Buffer);
      size += (piece as Buffer).length;
    }
    expect({ hash: back.digest("hex"), size }).toEqual({ hash: put.hash, size: put.size });
    expect(await subject.scratchFiles()).toEqual([]);
  });

  it("reads trees back as stored and reports missing objects as NOT_FOUND", async () => {
    const { store } = make();
    const blob = await store.putBlob("tenant-a", Readable.from([Buffer.from("x")]));
    const tree = encodeTree([
      { name: "b.txt", type: "file", mode: 0o600, size: 1, mtimeMs: 2, hash: blob.hash },
      { name: "link", type: "symlink", target: "b.txt" },
    ]);
    await store.putTree("tenant-a", tree.hash, tree.bytes);
    expect(encodeTree((await store.readTree("tenant-a", tree.hash)).entries).hash).toBe(tree.hash);
    const absent = sha256("never stored");
    await expect(store.readBlob("tenant-a", absent)).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(store.readTree("tenant-a", absent)).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(store.readTree("tenant-a", "../../etc")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(store.readBlob("../tenant-a", blob.hash)).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });

  it("keeps tenants apart: no shared objects, reads, dedup, prunes or drops across them", async () => {
    const { store } = make();
    // `t1` is a prefix of `t10`'s name: a store keying by a bare prefix would mix them up.
    const mine = await store.putBlob("t1", Readable.from([Buffer.from("secret")]));
    await expect(store.readBlob("t10", mine.hash)).rejects.toMatchObject({ code: "NOT_FOUND" });
    const theirs = await store.putBlob("t10", Readable.from([Buffer.from("secret")]));
    expect(theirs).toEqual({ ...mine, stored: true }); // stored again: no cross-tenant dedup
    expect(await store.prune("t1", new Set(), -1)).toEqual({ objects: 1, bytes: 6 });
    expect(await text(await store.readBlob("t10", mine.hash))).toBe("secret");
    await store.putBlob("t1", Readable.from([Buffer.from("secret")]));
    await store.dropTenant("t1");
    await expect(store.readBlob("t1", mine.hash)).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await text(await store.readBlob("t10", mine.hash))).toBe("secret");
  });

  it("prunes only unreferenced objects older than the grace, over several pages", async () => {
    const { store } = make();
    const kept: string[] = [];
    const dropped: { hash: string; size: number }[] = [];
    for (let index = 0; index < 10; index++) {
      const put = await store.putBlob("tenant-a", Readable.from([Buffer.from(`file ${index}`)]));
      if (index % 3 === 0) kept.push(put.hash);
      else dropped.push(put);
    }
    const tree = encodeTree([]);
    await store.putTree("tenant-a", tree.hash, tree.bytes);
    const keep = new Set([...kept, tree.hash]);
    const other = await store.putBlob("tenant-b", Readable.from([Buffer.from("file 1")]));
    // Recent: a checkpoint being captured right now has objects nothing references yet.
    expect(await store.prune("tenant-a", new Set(), 60_000)).toEqual({ objects: 0, bytes: 0 });
    const bytes = dropped.reduce((total, blob) => total + blob.size, 0);
    expect(await store.prune("tenant-a", keep, -1)).toEqual({ objects: dropped.length, bytes });
    for (const hash of kept) expect(await text(await store.readBlob("tenant-a", hash))).toMatch(/^file/);
    expect(await store.readTree("tenant-a", tree.hash)).toEqual({ v: 1, entries: [] });
    for (const { hash } of dropped) {
      await expect(store.readBlob("tenant-a", hash)).rejects.toMatchObject({ code: "NOT_FOUND" });
    }
    expect(await text(await store.readBlob("tenant-b", other.hash))).toBe("file 1");
    expect(await store.prune("tenant-a", keep, -1)).toEqual({ objects: 0, bytes: 0 });
    // A swept object can be stored again.
    expect((await store.putBlob("tenant-a", Readable.from([Buffer.from("file 1")]))).stored).toBe(true);
  });

  it("restarts an object's grace when a put references it again", async () => {
    const { store } = make();
    const blob = await store.putBlob("tenant-a", Readable.from([Buffer.from("old file")]));
    const tree = encodeTree([]);
    await store.putTree("tenant-a", tree.hash, tree.bytes);
    // Older than the grace by now (S3's LastModified has whole seconds: a margin of one)...
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    // ...but a checkpoint being written names them again: a prune must not take them from under it.
    expect(await store.putBlob("tenant-a", Readable.from([Buffer.from("old file")]))).toEqual({
      ...blob,
      stored: false,
    });
    expect(await store.putTree("tenant-a", tree.hash, tree.bytes)).toBe(false);
    expect(await store.prune("tenant-a", new Set(), 1_500)).toEqual({ objects: 0, bytes: 0 });
    expect(await store.prune("tenant-a", new Set(), -1)).toEqual({
      objects: 2,
      bytes: blob.size + tree.bytes.length,
    });
  });

  it("drops a tenant whole, tree cache included, and the tenant can start over", async () => {
    const { store } = make();
    const hashes: string[] = [];
    for (let index = 0; index < 9; index++) {
      hashes.push((await store.putBlob("tenant-a", Readable.from([Buffer.from(`v${index}`)]))).hash);
    }
    const tree = encodeTree([]);
    await store.putTree("tenant-a", tree.hash, tree.bytes);
    await store.readTree("tenant-a", tree.hash); // cached now
    await store.dropTenant("tenant-a");
    for (const hash of hashes) {
      await expect(store.readBlob("tenant-a", hash)).rejects.toMatchObject({ code: "NOT_FOUND" });
    }
    await expect(store.readTree("tenant-a", tree.hash)).rejects.toMatchObject({ code: "NOT_FOUND" });
    await store.dropTenant("tenant-a"); // nothing left: a no-op
    await store.dropTenant("never-seen");
    expect(await store.putTree("tenant-a", tree.hash, tree.bytes)).toBe(true);
    expect(await store.prune("tenant-a", new Set(), -1)).toEqual({ objects: 1, bytes: tree.bytes.length });
  });
});

function sha256(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}

async function filesUnder(root: string, wanted: (file: string) => boolean): Promise<string[]> {
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter(wanted);
}
