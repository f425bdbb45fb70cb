import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { AppError } from "@/server/shared/errors";
import { type Tree, TreeCache } from "./tree";

/**
 * Where checkpoints' objects live: blobs (file bytes) and trees (folder listings), each under its SHA-256.
 * Objects are immutable, so a write that finds its hash present writes nothing (dedup), and readers may
 * cache them. Each tenant has its own namespace: identical files of two tenants are stored twice, so no
 * tenant can learn from timing or counts whether another holds a file.
 */
export interface CheckpointStore {
  /** Stores the stream's bytes; `stored` is false when the blob was already there. */
  putBlob(tenantId: string, data: Readable): Promise<{ hash: string; size: number; stored: boolean }>;
  /** Stores a tree's canonical bytes (encodeTree) under its hash; false when it was already there. */
  putTree(tenantId: string, hash: string, bytes: Buffer): Promise<boolean>;
  readBlob(tenantId: string, hash: string): Promise<Readable>;
  /** A small blob's bytes at once (restores read thousands of them): optional, else readBlob is used. */
  readBlobBytes?(tenantId: string, hash: string): Promise<Buffer>;
  readTree(tenantId: string, hash: string): Promise<Tree>;
  /**
   * Deletes the tenant's objects not in `keep` that are older than `graceMs` (a checkpoint being stored
   * right now has written objects no stored checkpoint references yet). Yields between batches.
   */
  prune(
    tenantId: string,
    keep: ReadonlySet<string>,
    graceMs: number,
  ): Promise<{ objects: number; bytes: number }>;
  /** Deletes every object of the tenant (tenant deletion). */
  dropTenant(tenantId: string): Promise<void>;
}

const SAFE_TENANT = /^[A-Za-z0-9_-]{1,100}$/;
const HASH = /^[0-9a-f]{64}$/;

/**
 * The default store: a folder of this installation (BERTH_CHECKPOINT_DIR, else `checkpoints/` in its data
 * folder). S3CheckpointStore (s3-checkpoint-store.ts) replaces it when BERTH_CHECKPOINT_S3_BUCKET is set.
 */
export class FolderCheckpointStore implements CheckpointStore {
  // Trees are immutable and small; diffs and restores read the same ones again and again.
  private readonly trees = new TreeCache();
  private readonly folders = new Set<string>();

  constructor(private readonly root: string) {}

  async putBlob(tenantId: string, data: Readable): Promise<{ hash: string; size: number; stored: boolean }> {
    const dir = this.tenantDir(tenantId);
    const temp = path.join(dir, "incoming", randomUUID());
    await this.mkdirOnce(path.dirname(temp));
    const hasher = createHash("sha256");
    let size = 0;
    data.on("data", (chunk: Buffer) => {
      hasher.update(chunk);
      size += chunk.length;
    });
    let adopted = false;
    try {
      await pipeline(data, createWriteStream(temp, { mode: 0o600 }));
      const hash = hasher.digest("hex");
      adopted = await this.adopt(tenantId, hash, temp);
      return { hash, size, stored: adopted };
    } finally {
      if (!adopted) await fs.rm(temp, { force: true }); // an adopted temp file is the object now
    }
  }

  async putTree(tenantId: string, hash: string, bytes: Buffer): Promise<boolean> {
    const target = this.objectPath(tenantId, hash);
    if (await referencedAgain(target)) return false;
    const temp = path.join(this.tenantDir(tenantId), "incoming", randomUUID());
    await this.mkdirOnce(path.dirname(temp));
    let adopted = false;
    try {
      await fs.writeFile(temp, bytes, { mode: 0o600 });
      adopted = await this.adopt(tenantId, hash, temp, false);
      return adopted;
    } finally {
      if (!adopted) await fs.rm(temp, { force: true });
    }
  }

  async readBlob(tenantId: string, hash: string): Promise<Readable> {
    const file = this.objectPath(tenantId, hash);
    if (!(await exists(file))) throw missingObject(hash);
    return createReadStream(file);
  }

  async readBlobBytes(tenantId: string, hash: string): Promise<Buffer> {
    try {
      return await fs.readFile(this.objectPath(tenantId, hash));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") throw missingObject(hash);
      throw error;
    }
  }

  async readTree(tenantId: string, hash: string): Promise<Tree> {
    const key = `${tenantId}/${hash}`;
    const cached = this.trees.get(key);
    if (cached) return cached;
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(this.objectPath(tenantId, hash));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") throw missingObject(hash);
      throw error;
    }
    return this.trees.remember(key, bytes);
  }

  async prune(
    tenantId: string,
    keep: ReadonlySet<string>,
    graceMs: number,
  ): Promise<{ objects: number; bytes: number }> {
    const objectsDir = path.join(this.tenantDir(tenantId), "objects");
    const cutoff = Date.now() - graceMs;
    let objects = 0;
    let bytes = 0;
    let shards: string[];
    try {
      shards = await fs.readdir(objectsDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { objects, bytes };
      throw error;
    }
    for (const shard of shards) {
      const names = await fs.readdir(path.join(objectsDir, shard)).catch(() => [] as string[]);
      for (const name of names) {
        const hash = shard + name;
        if (keep.has(hash)) continue;
        const file = path.join(objectsDir, shard, name);
        const stat = await fs.stat(file).catch(() => null);
        if (!stat || stat.mtimeMs > cutoff) continue;
        await fs.rm(file, { force: true });
        this.trees.forget(`${tenantId}/${hash}`);
        objects += 1;
        bytes += stat.size;
      }
      // One shard (at most a few thousand unlinks) per turn of the event loop: job locks keep renewing.
      await yieldToLoop();
    }
    return { objects, bytes };
  }

  async dropTenant(tenantId: string): Promise<void> {
    const dir = this.tenantDir(tenantId);
    this.trees.forgetPrefix(`${tenantId}/`);
    await this.prune(tenantId, new Set(), -1);
    for (const folder of this.folders)
      if (folder.startsWith(`${dir}${path.sep}`)) this.folders.delete(folder);
    await fs.rm(dir, { recursive: true, force: true });
  }

  /** Moves a finished temp file to its object path unless the object exists (dedup). */
  private async adopt(tenantId: string, hash: string, temp: string, check = true): Promise<boolean> {
    const target = this.objectPath(tenantId, hash);
    // A rename over an object that appeared meanwhile replaces it with the same bytes: harmless.
    if (check && (await referencedAgain(target))) return false;
    await this.mkdirOnce(path.dirname(target));
    await fs.rename(temp, target);
    return true;
  }

  /** mkdir -p, once per folder and process (objects' shards are never removed while in use, only swept empty). */
  private async mkdirOnce(dir: string): Promise<void> {
    if (this.folders.has(dir)) return;
    await fs.mkdir(dir, { recursive: true });
    this.folders.add(dir);
  }

  private tenantDir(tenantId: string): string {
    return path.join(this.root, checkTenantId(tenantId));
  }

  private objectPath(tenantId: string, hash: string): string {
    return path.join(this.root, ...checkpointObjectKey(tenantId, hash).split("/"));
  }
}

/** The tenant id, checked: it names a folder or a key prefix, so it must not hold `/`, `..` or the like. */
export function checkTenantId(tenantId: string): string {
  if (!SAFE_TENANT.test(tenantId))
    throw new AppError("BAD_REQUEST", "Invalid tenant id for the checkpoint store");
  return tenantId;
}

/** Every store's layout of one object: `<tenant>/objects/<2 hex>/<62 hex>` (few entries per folder). */
export function checkpointObjectKey(tenantId: string, hash: string): string {
  if (!HASH.test(hash)) throw new AppError("BAD_REQUEST", "Invalid checkpoint object hash");
  return `${checkTenantId(tenantId)}/objects/${hash.slice(0, 2)}/${hash.slice(2)}`;
}

export function missingObject(hash: string): AppError {
  return new AppError("NOT_FOUND", `Checkpoint object ${hash.slice(0, 12)} is missing from the store`);
}

/**
 * True when the object exists, and then its mtime is now: the prune's grace counts from its last
 * reference, so a prune that began before the checkpoint naming it is written cannot take it.
 */
async function referencedAgain(file: string): Promise<boolean> {
  const now = new Date();
  return fs.utimes(file, now, now).then(
    () => true,
    () => false,
  );
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
