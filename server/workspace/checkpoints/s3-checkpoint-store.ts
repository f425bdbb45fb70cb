import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  type _Object as S3Object,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { AppError } from "@/server/shared/errors";
import { type CheckpointStore, checkpointObjectKey, checkTenantId, missingObject } from "./checkpoint-store";
import { type Tree, TreeCache } from "./tree";

/** Where and how to reach the bucket (validated from the environment by server/engine/checkpoint-config.ts). */
export type S3CheckpointStoreOptions = {
  readonly bucket: string;
  readonly region: string;
  /** An S3-compatible server's URL (MinIO, R2, Ceph, ...); absent → AWS's endpoint for the region. */
  readonly endpoint?: string;
  /** `http://host/bucket/key` instead of `http://bucket.host/key` (most self-hosted servers need it). */
  readonly forcePathStyle: boolean;
  /** Absent → the SDK's default chain (AWS_* variables, instance or pod role). */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** Prepended to every key ("" or ending in "/"), so one bucket can hold several installations. */
  readonly prefix: string;
  /** Local folder where blobs too large to hold in memory wait while their hash is computed. */
  readonly spoolDir: string;
  /** Keys per listed page and per delete batch (default and S3's maximum 1,000; tests use a few). */
  readonly pageSize?: number;
};

/**
 * Up to this size a blob is hashed in memory and sent in one PUT. Above it, it is spooled to a local file:
 * the key is its hash, known only at the end of the stream, and dedup must skip the upload entirely.
 */
const INLINE_LIMIT = 4 * 1024 * 1024;
/** Multipart part size and parallel parts: bounds one large upload's memory to about 16 MiB. */
const PART_SIZE = 8 * 1024 * 1024;
const PART_QUEUE = 2;
/** ListObjectsV2's and DeleteObjects' own maximum: one page listed, one batch deleted. */
const MAX_PAGE = 1_000;
/** The largest object one CopyObject may copy (S3's limit). */
const MAX_COPY_BYTES = 5 * 1024 ** 3;

/**
 * Checkpoint objects in an S3 bucket, with the folder store's semantics: `<prefix><tenant>/objects/aa/<rest>`
 * per tenant (never shared), a present object is never uploaded again, prune and dropTenant work page by
 * page (at most 1,000 keys listed or deleted per request) and nothing is read or hashed synchronously.
 */
export class S3CheckpointStore implements CheckpointStore {
  private readonly client: S3Client;
  // Trees are immutable and small; diffs and restores read the same ones again and again.
  private readonly trees = new TreeCache();
  private readonly pageSize: number;

  constructor(private readonly options: S3CheckpointStoreOptions) {
    this.pageSize = Math.min(Math.max(1, options.pageSize ?? MAX_PAGE), MAX_PAGE);
    this.client = new S3Client({
      region: options.region,
      forcePathStyle: options.forcePathStyle,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      ...(options.credentials ? { credentials: options.credentials } : {}),
      // Checksums only where S3 requires them: the SDK's default (a CRC trailer in aws-chunked bodies) is
      // refused by many S3-compatible servers, and every object is verified by its SHA-256 name anyway.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  /** Closes the client's kept-alive connections (a process that built a store only for its boot check). */
  close(): void {
    this.client.destroy();
  }

  /** The boot check: the bucket exists and these credentials may use it. Returns a line for the log. */
  async probe(): Promise<string> {
    const { bucket, endpoint, region, prefix } = this.options;
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: bucket }));
    } catch (error) {
      const status = error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
      const why =
        status === 404
          ? "the bucket does not exist"
          : status === 403 || status === 401
            ? "access denied (check the access key, the secret and the bucket policy)"
            : status === 301
              ? `the bucket is in another region than ${region}`
              : (error as Error).message;
      throw new AppError(
        "UNAVAILABLE",
        `Checkpoint bucket ${bucket} at ${endpoint ?? `AWS S3 (${region})`} is unusable: ${why}`,
        { cause: error },
      );
    }
    return `S3 bucket ${bucket}${prefix ? ` under ${prefix}` : ""} at ${endpoint ?? `AWS S3 (${region})`}`;
  }

  async putBlob(tenantId: string, data: Readable): Promise<{ hash: string; size: number; stored: boolean }> {
    this.tenantPrefix(tenantId);
    const hasher = createHash("sha256");
    const chunks = data[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>;
    const head: Buffer[] = [];
    let size = 0;
    const next = async (): Promise<Buffer | null> => {
      const step = await chunks.next();
      if (step.done) return null;
      const chunk = Buffer.isBuffer(step.value) ? step.value : Buffer.from(step.value);
      hasher.update(chunk);
      size += chunk.length;
      return chunk;
    };
    try {
      for (let chunk = await next(); chunk; chunk = size > INLINE_LIMIT ? null : await next()) {
        head.push(chunk);
      }
      if (size <= INLINE_LIMIT) {
        const hash = hasher.digest("hex");
        const body = Buffer.concat(head, size);
        return { hash, size, stored: await this.putIfAbsent(tenantId, hash, body) };
      }
      return await this.putSpooled(tenantId, head, next, () => ({ hash: hasher.digest("hex"), size }));
    } finally {
      // An error or an early return must not leave the source paused with a producer behind it.
      await chunks.return?.();
    }
  }

  async putTree(tenantId: string, hash: string, bytes: Buffer): Promise<boolean> {
    return this.putIfAbsent(tenantId, hash, bytes);
  }

  async readBlob(tenantId: string, hash: string): Promise<Readable> {
    const response = await this.get(tenantId, hash);
    return response.Body as Readable; // Node's SDK answers an http.IncomingMessage: streamed, not buffered
  }

  async readTree(tenantId: string, hash: string): Promise<Tree> {
    const key = this.key(tenantId, hash);
    const cached = this.trees.get(key);
    if (cached) return cached;
    const response = await this.get(tenantId, hash);
    const bytes = Buffer.from(await response.Body!.transformToByteArray());
    return this.trees.remember(key, bytes);
  }

  async prune(
    tenantId: string,
    keep: ReadonlySet<string>,
    graceMs: number,
  ): Promise<{ objects: number; bytes: number }> {
    const objectsPrefix = `${this.tenantPrefix(tenantId)}objects/`;
    // LastModified has whole seconds on most servers: an object may look up to 1 s older than it is,
    // which only matters for graces far shorter than a checkpoint's capture.
    const cutoff = Date.now() - graceMs;
    let objects = 0;
    let bytes = 0;
    for await (const page of this.pages(objectsPrefix)) {
      const doomed = page.filter((object) => {
        const hash = hashOfKey(object.Key!, objectsPrefix);
        if (!hash || keep.has(hash)) return false;
        return (object.LastModified?.getTime() ?? Infinity) <= cutoff;
      });
      await this.deleteKeys(doomed.map((object) => object.Key!));
      for (const object of doomed) {
        this.trees.forget(object.Key!);
        objects += 1;
        bytes += object.Size ?? 0;
      }
      await yieldToLoop();
    }
    return { objects, bytes };
  }

  async dropTenant(tenantId: string): Promise<void> {
    const prefix = this.tenantPrefix(tenantId);
    this.trees.forgetPrefix(prefix);
    // Everything under the tenant's prefix, objects or not, one listed page (≤ 1,000 keys) per request.
    for await (const page of this.pages(prefix)) {
      await this.deleteKeys(page.map((object) => object.Key!));
      await yieldToLoop();
    }
  }

  /** Large blob: the rest of the stream goes to a local file, then (unless present) to a multipart upload. */
  private async putSpooled(
    tenantId: string,
    head: readonly Buffer[],
    next: () => Promise<Buffer | null>,
    finish: () => { hash: string; size: number },
  ): Promise<{ hash: string; size: number; stored: boolean }> {
    const temp = path.join(this.options.spoolDir, "incoming", randomUUID());
    await fs.mkdir(path.dirname(temp), { recursive: true });
    try {
      await pipeline(
        Readable.from(
          (async function* () {
            yield* head;
            for (let chunk = await next(); chunk; chunk = await next()) yield chunk;
          })(),
        ),
        createWriteStream(temp, { mode: 0o600 }),
      );
      const { hash, size } = finish();
      const key = this.key(tenantId, hash);
      if (await this.referencedAgain(key, size)) return { hash, size, stored: false };
      const upload = new Upload({
        client: this.client,
        params: { Bucket: this.options.bucket, Key: key, Body: createReadStream(temp) },
        partSize: PART_SIZE,
        queueSize: PART_QUEUE,
        leavePartsOnError: false, // a failed upload aborts, so no orphaned parts are billed
      });
      await upload.done();
      return { hash, size, stored: true };
    } finally {
      await fs.rm(temp, { force: true });
    }
  }

  private async putIfAbsent(tenantId: string, hash: string, body: Buffer): Promise<boolean> {
    const key = this.key(tenantId, hash);
    if (await this.referencedAgain(key, body.length)) return false;
    await this.client.send(
      new PutObjectCommand({ Bucket: this.options.bucket, Key: key, Body: body, ContentLength: body.length }),
    );
    return true;
  }

  /**
   * True when the object exists, and then its LastModified is now, as the folder store's mtime: the prune's
   * grace counts from the last reference, so a prune that began before the checkpoint naming it is
   * written cannot take it. A copy onto itself with new metadata is S3's way to touch an object: one
   * request, no bytes sent, and a 404 when absent. S3 copies at most 5 GiB in one request, so a larger
   * object is only checked (its grace then counts from its upload).
   */
  private async referencedAgain(key: string, size: number): Promise<boolean> {
    if (size > MAX_COPY_BYTES) return this.exists(key);
    const source = `${this.options.bucket}/${key}`.split("/").map(encodeURIComponent).join("/");
    try {
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.options.bucket,
          Key: key,
          CopySource: source,
          MetadataDirective: "REPLACE",
          Metadata: { "berth-referenced": new Date().toISOString() },
        }),
      );
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private async exists(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.options.bucket, Key: key }));
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private async get(tenantId: string, hash: string) {
    try {
      return await this.client.send(
        new GetObjectCommand({ Bucket: this.options.bucket, Key: this.key(tenantId, hash) }),
      );
    } catch (error) {
      if (isNotFound(error)) throw missingObject(hash);
      throw error;
    }
  }

  /** Every object under `prefix`, one ListObjectsV2 page at a time (continuation tokens, never all at once). */
  private async *pages(prefix: string): AsyncGenerator<S3Object[]> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.options.bucket,
          Prefix: prefix,
          MaxKeys: this.pageSize,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      const objects = (page.Contents ?? []).filter((object) => object.Key?.startsWith(prefix));
      if (objects.length > 0) yield objects;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** One DeleteObjects per ≤ 1,000 keys; a key S3 could not delete fails the call (the job retries). */
  private async deleteKeys(keys: readonly string[]): Promise<void> {
    for (let start = 0; start < keys.length; start += this.pageSize) {
      const batch = keys.slice(start, start + this.pageSize);
      const result = await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.options.bucket,
          Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
        }),
      );
      const failed = result.Errors?.filter((error) => error.Code !== "NoSuchKey") ?? [];
      if (failed.length > 0) {
        throw new AppError(
          "UNAVAILABLE",
          `Deleting ${failed.length} checkpoint objects failed: ${failed[0]!.Code} ${failed[0]!.Message}`,
        );
      }
    }
  }

  private tenantPrefix(tenantId: string): string {
    return `${this.options.prefix}${checkTenantId(tenantId)}/`;
  }

  private key(tenantId: string, hash: string): string {
    return `${this.options.prefix}${checkpointObjectKey(tenantId, hash)}`;
  }
}

/** `<objectsPrefix>aa/<62 hex>` → the hash; anything else (a stray key) → null, never deleted by a prune. */
function hashOfKey(key: string, objectsPrefix: string): string | null {
  const [shard, rest, ...more] = key.slice(objectsPrefix.length).split("/");
  const hash = `${shard}${rest}`;
  return more.length === 0 && shard?.length === 2 && /^[0-9a-f]{64}$/.test(hash) ? hash : null;
}

function isNotFound(error: unknown): boolean {
  return (
    error instanceof S3ServiceException &&
    (error.$metadata.httpStatusCode === 404 || error.name === "NoSuchKey" || error.name === "NotFound")
  );
}
