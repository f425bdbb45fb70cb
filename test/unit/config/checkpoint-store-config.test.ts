import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { createEngine } from "@/server/engine/engine";
import { createDriverSet } from "@/server/engine/driver-set";
import { createLogger } from "@/server/logger";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { QueueSet } from "@/server/queue/queues";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { S3CheckpointStore } from "@/server/workspace/checkpoints/s3-checkpoint-store";
import { type LocalS3Server, startLocalS3Server } from "@/test/fixtures/s3-server/s3-server";

const USER = 1000;
const load = (env: Record<string, string>) => loadEngineConfig(env, "/srv/berth", USER);

const S3_ENV = {
  BERTH_CHECKPOINT_S3_BUCKET: "berth-checkpoints",
  BERTH_CHECKPOINT_S3_ENDPOINT: "http://127.0.0.1:9000",
  BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE: "true",
  BERTH_CHECKPOINT_S3_ACCESS_KEY_ID: "key",
  BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY: "secret",
  BERTH_CHECKPOINT_S3_PREFIX: "/berth/prod/",
};

describe("engine config: the checkpoint store", () => {
  it("keeps checkpoints in the folder unless a bucket is configured", () => {
    const config = load({ BERTH_DATA_DIR: "/var/berth" });
    expect(config.checkpointS3).toBeNull();
    expect(config.checkpointDir).toBe("/var/berth/checkpoints");
  });

  it("reads every S3 variable, the folder becoming the spool of large blobs", () => {
    expect(load({ ...S3_ENV, BERTH_CHECKPOINT_DIR: "spool" }).checkpointS3).toEqual({
      bucket: "berth-checkpoints",
      region: "us-east-1",
      endpoint: "http://127.0.0.1:9000",
      forcePathStyle: true,
      credentials: { accessKeyId: "key", secretAccessKey: "secret" },
      prefix: "berth/prod/",
      spoolDir: "/srv/berth/spool",
    });
    // Only the bucket: AWS's endpoint, the SDK's default credentials, no prefix.
    expect(
      load({ BERTH_CHECKPOINT_S3_BUCKET: "b.example", BERTH_CHECKPOINT_S3_REGION: "eu-west-3" }).checkpointS3,
    ).toEqual({
      bucket: "b.example",
      region: "eu-west-3",
      forcePathStyle: false,
      prefix: "",
      spoolDir: "/srv/berth/.data/checkpoints",
    });
  });

  it("fails at load, naming the variable, on a half-done or invalid S3 configuration", () => {
    const { BERTH_CHECKPOINT_S3_BUCKET: _bucket, ...withoutBucket } = S3_ENV;
    expect(() => load(withoutBucket)).toThrow(/Invalid checkpoint store configuration/);
    expect(() => load(withoutBucket)).toThrow(
      /BERTH_CHECKPOINT_S3_BUCKET: required by BERTH_CHECKPOINT_S3_ENDPOINT, .*BERTH_CHECKPOINT_S3_PREFIX/,
    );
    const { BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY: _secret, ...withoutSecret } = S3_ENV;
    expect(() => load(withoutSecret)).toThrow(
      /BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY: set both BERTH_CHECKPOINT_S3_ACCESS_KEY_ID/,
    );
    expect(() => load({ ...S3_ENV, BERTH_CHECKPOINT_S3_ENDPOINT: "ftp://host" })).toThrow(
      /BERTH_CHECKPOINT_S3_ENDPOINT: an http\(s\) URL/,
    );
    expect(() => load({ ...S3_ENV, BERTH_CHECKPOINT_S3_BUCKET: "Has_Upper" })).toThrow(
      /BERTH_CHECKPOINT_S3_BUCKET/,
    );
    expect(() => load({ ...S3_ENV, BERTH_CHECKPOINT_S3_PREFIX: "a/../b" })).toThrow(
      /BERTH_CHECKPOINT_S3_PREFIX/,
    );
    expect(() => load({ ...S3_ENV, BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE: "maybe" })).toThrow(
      /BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE/,
    );
  });

  it("makes the engine build the store its config names", async () => {
    for (const [env, kind] of [
      [{}, FolderCheckpointStore],
      [S3_ENV, S3CheckpointStore],
    ] as const) {
      const config = load(env);
      const engine = createEngine({
        config,
        drivers: createDriverSet(config),
        queues: {} as QueueSet<BerthJobCatalog>, // never used: nothing here provisions
        secret: "test-secret",
        log: createLogger({ level: "silent" }),
        ensureProvisioned: () => Promise.reject(new Error("not in this test")),
      });
      expect(engine.checkpoints).toBeInstanceOf(kind);
      await engine.close();
    }
  });
});

describe("the S3 store's boot check", () => {
  let s3: LocalS3Server;
  beforeAll(async () => {
    s3 = await startLocalS3Server();
  });
  afterAll(async () => {
    await s3?.stop();
  });
  const probe = async (bucket: string, credentials = s3.credentials) => {
    const store = new S3CheckpointStore({
      bucket,
      region: "us-east-1",
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials,
      prefix: "",
      spoolDir: "/nonexistent",
    });
    try {
      return await store.probe();
    } finally {
      store.close();
    }
  };

  it("accepts a reachable bucket and says why it refuses one that is not", async () => {
    expect(await probe(s3.bucket)).toBe(`S3 bucket ${s3.bucket} at ${s3.endpoint}`);
    await expect(probe("no-such-bucket")).rejects.toThrow(
      `Checkpoint bucket no-such-bucket at ${s3.endpoint} is unusable: the bucket does not exist`,
    );
    await expect(probe(s3.bucket, { accessKeyId: "wrong", secretAccessKey: "wrong" })).rejects.toThrow(
      /unusable: access denied/,
    );
  });
});
