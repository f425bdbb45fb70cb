import { randomBytes } from "node:crypto";
import type { Sandbox } from "e2b";
import type { z } from "zod";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { E2bClient } from "./e2b-client";
import { runChore } from "./e2b-commands";
import type { E2bDriverConfig } from "./e2b-config";
import { SANDBOX_PATHS, ZMarker } from "./e2b-naming";

/** What one root chore learns about a sandbox before Berth uses it (one round trip instead of five). */
export type SandboxFacts = {
  uid: number;
  gid: number;
  home: string;
  /** The gateway bundle of this Berth is already there. */
  bundlePresent: boolean;
  /** The workdir existed before this chore (it creates it): false on a fresh or reset sandbox. */
  workdirExisted: boolean;
  /** The marker Berth wrote at provision, if any (root-only: the agent cannot forge or remove it). */
  marker: { workspaceId: string; tenantId: string; nonce: string } | null;
};

/**
 * $1 user, $2 workdir, $3 bundle path. Creates Berth's root-only folder and the workdir (owned by the user),
 * then prints one fact per line: uid, gid, home, bundle, workdir-existed, marker JSON (last, may be empty).
 */
const PREPARE = [
  "set -e",
  `install -d -m 0700 -o root -g root ${SANDBOX_PATHS.berthDir}`,
  'if [ -d "$2" ]; then existed=yes; else existed=no; mkdir -p -- "$2"; fi',
  'chown "$1": -- "$2"',
  'id -u "$1"; id -g "$1"; getent passwd "$1" | cut -d: -f6',
  'if [ -f "$3" ]; then echo yes; else echo no; fi',
  'echo "$existed"',
  `cat ${SANDBOX_PATHS.marker} 2>/dev/null | tr -d '\\n' || true`,
].join("\n");

export async function prepareSandbox(
  sandbox: Sandbox,
  options: { user: string; workdir: string; bundlePath: string; requestTimeoutMs: number; timeoutMs: number },
): Promise<SandboxFacts> {
  const result = await runChore(sandbox, PREPARE, [options.user, options.workdir, options.bundlePath], {
    user: "root",
    timeoutMs: options.timeoutMs,
    requestTimeoutMs: options.requestTimeoutMs,
  });
  const lines = result.stdout.split("\n");
  const [uid, gid, home, bundle, existed, marker = ""] = lines;
  if (result.exitCode !== 0 || uid === undefined || !/^\d+$/.test(uid) || !/^\d+$/.test(gid ?? "")) {
    throw new AppError(
      "INTERNAL",
      `Could not prepare the sandbox (does the template have user ${options.user}?): ${result.stderr.trim()}`,
      { details: { sandboxId: sandbox.sandboxId, exitCode: result.exitCode } },
    );
  }
  return {
    uid: Number(uid),
    gid: Number(gid),
    home: home || "/",
    bundlePresent: bundle === "yes",
    workdirExisted: existed === "yes",
    marker: parseMarker(marker),
  };
}

function parseMarker(text: string): SandboxFacts["marker"] {
  if (!text.trim()) return null;
  try {
    const parsed = ZMarker.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * $1 marker JSON, $2 "replace" to drop the old one first. Writes the marker only when there is none
 * (noclobber: O_EXCL, so two racing provisions, or binds, agree on one) and prints the marker in place.
 */
const WRITE_MARKER = [
  `[ "$2" = replace ] && rm -f ${SANDBOX_PATHS.marker}`,
  `(set -C; printf '%s' "$1" > ${SANDBOX_PATHS.marker}) 2>/dev/null`,
  `cat ${SANDBOX_PATHS.marker}`,
].join("\n");

/**
 * Writes the workspace's root-only marker unless one is in place (the one in place wins, unless it is
 * replaced) and answers the marker in place: another workspace's, when the sandbox was someone else's.
 */
export async function writeMarker(
  sandbox: Sandbox,
  spec: Pick<WorkspaceSpec, "workspaceId" | "tenantId">,
  options: { nonce: string | undefined; replace: boolean; requestTimeoutMs: number },
): Promise<z.infer<typeof ZMarker>> {
  const marker = {
    workspaceId: spec.workspaceId,
    tenantId: spec.tenantId,
    nonce: options.nonce ?? randomBytes(12).toString("hex"),
  };
  const result = await runChore(
    sandbox,
    WRITE_MARKER,
    [JSON.stringify(marker), options.replace ? "replace" : "keep"],
    { user: "root", timeoutMs: 30_000, requestTimeoutMs: options.requestTimeoutMs },
  );
  try {
    return ZMarker.parse(JSON.parse(result.stdout));
  } catch {
    throw new AppError("INTERNAL", `could not write the workspace marker: ${result.stderr.trim()}`, {
      details: { sandboxId: sandbox.sandboxId },
    });
  }
}

/** E2B sizes sandboxes by template: refuse (and kill) one smaller than configured, with the fix in the message. */
export async function checkTemplateSize(
  client: E2bClient,
  config: E2bDriverConfig,
  sandbox: Sandbox,
): Promise<void> {
  const { minCpuCount, minMemoryMB, template } = config;
  if (minCpuCount === undefined && minMemoryMB === undefined) return;
  const info = await client.info(sandbox.sandboxId);
  if (!info) return;
  const short =
    (minCpuCount !== undefined && info.cpuCount < minCpuCount) ||
    (minMemoryMB !== undefined && info.memoryMB < minMemoryMB);
  if (!short) return;
  await client.kill(sandbox.sandboxId);
  throw new AppError(
    "UNPROCESSABLE",
    `E2B template ${template} gives ${info.cpuCount} vCPU / ${info.memoryMB} MB, below BERTH_E2B_CPU_COUNT=${minCpuCount ?? "-"} / BERTH_E2B_MEMORY_MB=${minMemoryMB ?? "-"}: build a bigger template (e2b template build --cpu-count --memory-mb) and set BERTH_E2B_TEMPLATE`,
  );
}
