import type { Sandbox } from "e2b";
import { AppError } from "@/server/shared/errors";
import { runChore } from "./e2b-commands";
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
