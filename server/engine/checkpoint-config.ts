import { z } from "zod";
import { parseEnv, type RawEnv } from "@/server/config/env";
import { type CheckpointStore, FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import {
  S3CheckpointStore,
  type S3CheckpointStoreOptions,
} from "@/server/workspace/checkpoints/s3-checkpoint-store";

const S3_VARIABLES = [
  "BERTH_CHECKPOINT_S3_REGION",
  "BERTH_CHECKPOINT_S3_ENDPOINT",
  "BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE",
  "BERTH_CHECKPOINT_S3_ACCESS_KEY_ID",
  "BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY",
  "BERTH_CHECKPOINT_S3_PREFIX",
] as const;

/** Key prefix segments: no empty, `.` or `..` segment, nothing a server could read as a path trick. */
const PREFIX_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;

/**
 * The S3 checkpoint store's variables. Setting BERTH_CHECKPOINT_S3_BUCKET switches the store from the
 * folder (BERTH_CHECKPOINT_DIR) to the bucket; every other S3 variable without it is a mistake and fails
 * the boot, so a half-done configuration never silently keeps checkpoints on local disk.
 */
const ZCheckpointS3Env = z
  .object({
    // The bucket (S3 naming rules). Berth never creates it: the boot check fails when it is missing.
    BERTH_CHECKPOINT_S3_BUCKET: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, "3-63 lowercase letters, digits, dots or hyphens")
      .optional(),
    // The bucket's region (any value for most S3-compatible servers).
    BERTH_CHECKPOINT_S3_REGION: z
      .string()
      .regex(/^[a-z0-9-]{1,40}$/, "a region name such as eu-west-1")
      .default("us-east-1"),
    // An S3-compatible server (MinIO, Ceph RGW, R2, ...): its base URL. Unset → AWS S3 of the region.
    BERTH_CHECKPOINT_S3_ENDPOINT: z.url({ protocol: /^https?$/, error: "an http(s) URL" }).optional(),
    // Path-style addressing (`<endpoint>/<bucket>/<key>`), which most self-hosted servers need.
    BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE: z.stringbool().default(false),
    // Static credentials, both or neither. Neither → the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
    // AWS_SECRET_ACCESS_KEY, a web identity token, an instance or pod role).
    BERTH_CHECKPOINT_S3_ACCESS_KEY_ID: z.string().optional(),
    BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY: z.string().optional(),
    // Prepended to every key (`berth/prod` → `berth/prod/<tenant>/objects/…`): several installations or
    // other data can share one bucket without meeting.
    BERTH_CHECKPOINT_S3_PREFIX: z
      .string()
      .transform((value) => value.replace(/^\/+|\/+$/g, ""))
      .refine(
        (value) => value.split("/").every((segment) => PREFIX_SEGMENT.test(segment)),
        "`/`-separated segments of letters, digits, `.`, `_` or `-` (no empty, `.` or `..` segment)",
      )
      .optional(),
  })
  .superRefine((env, context) => {
    const keyId = Boolean(env.BERTH_CHECKPOINT_S3_ACCESS_KEY_ID);
    if (env.BERTH_CHECKPOINT_S3_BUCKET && keyId !== Boolean(env.BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY)) {
      context.addIssue({
        code: "custom",
        path: [keyId ? "BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY" : "BERTH_CHECKPOINT_S3_ACCESS_KEY_ID"],
        message:
          "set both BERTH_CHECKPOINT_S3_ACCESS_KEY_ID and BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY, or neither (the SDK's default credentials)",
      });
    }
  });

/**
 * The S3 store's options from the environment, or null for the folder store. `spoolDir` is the checkpoint
 * folder, which with S3 only holds large blobs while they are hashed. Throws the list of problems.
 */
export function loadCheckpointS3Config(env: RawEnv, spoolDir: string): S3CheckpointStoreOptions | null {
  const orphans = S3_VARIABLES.filter((name) => env[name]);
  if (!env.BERTH_CHECKPOINT_S3_BUCKET && orphans.length > 0) {
    // Parsed with an empty bucket, so the message names every variable set without it.
    const missing = z.object({
      BERTH_CHECKPOINT_S3_BUCKET: z.string({
        error: `required by ${orphans.join(", ")} (or unset those to keep checkpoints in BERTH_CHECKPOINT_DIR)`,
      }),
    });
    parseEnv(missing, env, "checkpoint store");
  }
  const parsed = parseEnv(ZCheckpointS3Env, env, "checkpoint store");
  if (!parsed.BERTH_CHECKPOINT_S3_BUCKET) return null;
  const accessKeyId = parsed.BERTH_CHECKPOINT_S3_ACCESS_KEY_ID;
  const secretAccessKey = parsed.BERTH_CHECKPOINT_S3_SECRET_ACCESS_KEY;
  return {
    bucket: parsed.BERTH_CHECKPOINT_S3_BUCKET,
    region: parsed.BERTH_CHECKPOINT_S3_REGION,
    ...(parsed.BERTH_CHECKPOINT_S3_ENDPOINT ? { endpoint: parsed.BERTH_CHECKPOINT_S3_ENDPOINT } : {}),
    forcePathStyle: parsed.BERTH_CHECKPOINT_S3_FORCE_PATH_STYLE,
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
    prefix: parsed.BERTH_CHECKPOINT_S3_PREFIX ? `${parsed.BERTH_CHECKPOINT_S3_PREFIX}/` : "",
    spoolDir,
  };
}

/** The store the engine config names: the bucket when one is configured, else the folder. */
export function createCheckpointStore(config: {
  readonly checkpointDir: string;
  readonly checkpointS3?: S3CheckpointStoreOptions | null;
}): CheckpointStore {
  return config.checkpointS3
    ? new S3CheckpointStore(config.checkpointS3)
    : new FolderCheckpointStore(config.checkpointDir);
}
