import path from "node:path";
import { z } from "zod";

/** Where the workspace appears inside every sandbox (commands, MCP servers, the agent's instructions). */
export const SANDBOX_WORKDIR = "/workspace";
/** Inside the gateway's sandbox only: its socket folder and its code. */
export const SANDBOX_RUNTIME_DIR = "/run/berth";
export const SANDBOX_GATEWAY_BUNDLE = "/opt/berth/berth-gateway.cjs";
/** Inside a command's sandbox that may use egress: the host proxy's socket folder (read-only). */
export const SANDBOX_EGRESS_DIR = "/run/berth-egress";

const MAX_UID = 4_294_967_294;
const ZAbsolute = z.string().refine((value) => path.isAbsolute(value), "must be an absolute path");

/**
 * The bubblewrap sandbox of the default `local` backend. Parsed once at the composition root
 * (server/engine/engine-config.ts maps the BERTH_SANDBOX_* variables onto it).
 */
export const ZSandboxConfig = z
  .object({
    bwrapPath: ZAbsolute.default("/usr/bin/bwrap"),
    /** util-linux `prlimit`: sets the process limit (RLIMIT_NPROC) before bwrap starts. */
    prlimitPath: ZAbsolute.default("/usr/bin/prlimit"),
    /**
     * util-linux `setpriv`: drops root to the workspace uid (no supplementary groups) once the sandbox has
     * joined its cgroup, for commands and terminals alike (node-pty could not drop the groups itself).
     */
    setprivPath: ZAbsolute.default("/usr/bin/setpriv"),
    /**
     * Memory (swap included) of all the sandboxes of one workspace together, enforced by a cgroup when
     * Berth is root (the same default as a Docker workspace). The kernel OOM-kills inside the workspace.
     */
    memoryLimitBytes: z
      .number()
      .int()
      .min(16 * 1024 * 1024)
      .default(1024 * 1024 * 1024),
    /**
     * When Berth runs as root, each workspace's commands run as `uidBase + hash(tenant, user, workspace) %
     * uidCount` (gid the same): never root, never Berth's uid, and a different uid per workspace, so the
     * process limit and file ownership are per workspace. The range must not hold real users.
     */
    uidBase: z.number().int().min(1_000).default(100_000_000),
    uidCount: z.number().int().min(1).default(100_000_000),
    /** RLIMIT_NPROC of the workspace uid: every process and thread of the workspace counts (fork bombs). */
    pidsLimit: z.number().int().min(16).default(256),
    /** Wall-clock ceiling of one command, whatever timeout the caller asked for. */
    commandTimeoutMs: z
      .number()
      .int()
      .min(1_000)
      .default(30 * 60_000),
    /** Share the host's network (default: a private network namespace with only a loopback). */
    network: z.boolean().default(false),
    /** Host paths visible read-only at the same path (tool installations, e.g. a node_modules). */
    readOnlyPaths: z.array(ZAbsolute).default([]),
    /** Extra environment of every command and MCP server. */
    env: z.record(z.string(), z.string()).default({}),
    /**
     * Gateway sockets and the sandbox process registry (`procs/`), shared by every Berth process of the
     * machine so a stop reaches sandboxes another process started. Unix socket paths are limited to 107
     * bytes: keep it short.
     */
    runtimeRoot: ZAbsolute.default("/tmp/berth-sandbox"),
    gateway: z
      .object({
        callTimeoutMs: z.number().int().positive().default(30_000),
        startTimeoutMs: z.number().int().positive().default(30_000),
      })
      .prefault({}),
  })
  .refine((config) => config.uidBase + config.uidCount - 1 <= MAX_UID, {
    message: `uidBase + uidCount must stay below ${MAX_UID}`,
  });

export type TSandboxConfig = z.output<typeof ZSandboxConfig>;
export type TSandboxConfigInput = z.input<typeof ZSandboxConfig>;
