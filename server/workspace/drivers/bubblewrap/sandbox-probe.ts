import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { BubblewrapMachine } from "./bubblewrap-machine";
import { sandboxIdentity, sandboxKey } from "./sandbox-args";
import { ZSandboxConfig, type TSandboxConfigInput } from "./sandbox-config";
import { traversableTree } from "./sandbox-dirs";
import { detectCgroups, endWorkspaceCgroup } from "./sandbox-cgroup";
import { SandboxRegistry } from "./sandbox-registry";

export type SandboxProbe =
  { ok: true; uid: number; dropped: boolean; memory: string } | { ok: false; reason: string; hint: string };

const SANDBOX_INSTALL_HINT =
  "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; it also needs util-linux's prlimit, " +
  "setpriv when Berth runs as root, and " +
  "unprivileged user namespaces, `sysctl kernel.unprivileged_userns_clone=1` where that exists), or opt in " +
  "to running agent commands on the host with Berth's privileges: BERTH_WORKSPACE_BACKEND=host-unconfined " +
  "(trusted agents only).";

/**
 * Runs one tiny sandbox exactly as a workspace command would (same argv, same uid drop) and checks that
 * it ran confined: `npm start` boots on the sandboxed backend only when this passes.
 */
export async function probeSandbox(
  sandbox: TSandboxConfigInput = {},
  options: { basedir?: string } = {},
): Promise<SandboxProbe> {
  const config = ZSandboxConfig.parse(sandbox);
  const root = (process.getuid?.() ?? 0) === 0;
  for (const binary of [config.bwrapPath, config.prlimitPath, ...(root ? [config.setprivPath] : [])]) {
    const missing = await fs.access(binary, fs.constants.X_OK).then(
      () => false,
      () => true,
    );
    if (missing)
      return { ok: false, reason: `${binary} is missing or not executable`, hint: SANDBOX_INSTALL_HINT };
  }
  const key = sandboxKey({ tenantId: "probe", userId: "probe", workspaceId: randomBytes(8).toString("hex") });
  const identity = sandboxIdentity(config, key);
  // In the real base directory when given: its parents must let the workspace uid through.
  const parent = options.basedir ?? path.join(config.runtimeRoot, "probe");
  await traversableTree(options.basedir ?? config.runtimeRoot, parent);
  const dir = path.join(parent, `.sandbox-probe-${key}`);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const registry = new SandboxRegistry(config.runtimeRoot, detectCgroups(config.memoryLimitBytes));
  try {
    if (identity.dropped) await fs.chown(dir, identity.uid, identity.gid);
    const backend = new BubblewrapMachine({
      config,
      hostWorkdir: dir,
      key,
      identity,
      registry,
    });
    const result = await backend.exec(["/bin/sh", "-c", "id -u && touch /workspace/ok"], {
      timeoutMs: 20_000,
    });
    const written = await fs.stat(path.join(dir, "ok")).catch(() => null);
    const uid = Number(result.stdout.toString().trim());
    if (result.exitCode !== 0 || !written) {
      const stderr = result.stderr.toString().trim().slice(0, 500);
      const hint = stderr.includes("Permission denied")
        ? `Every parent folder of ${parent} must be traversable by other users (chmod o+x), or set ` +
          `BERTH_WORKSPACE_BASEDIR to a folder that is. ${SANDBOX_INSTALL_HINT}`
        : SANDBOX_INSTALL_HINT;
      return { ok: false, reason: `a test sandbox failed (exit ${result.exitCode}): ${stderr}`, hint };
    }
    if (uid === 0 || (identity.dropped && uid !== identity.uid)) {
      return {
        ok: false,
        reason: `a test sandbox ran as uid ${uid}, not the workspace uid`,
        hint: SANDBOX_INSTALL_HINT,
      };
    }
    const { cgroups } = registry;
    const memory = cgroups.available
      ? `memory limited to ${Math.round(cgroups.limitBytes / 1024 / 1024)} MiB per workspace (cgroup v${cgroups.version})`
      : `memory NOT limited (${cgroups.reason})`;
    return { ok: true, uid, dropped: identity.dropped, memory };
  } finally {
    await endWorkspaceCgroup(registry.cgroups, key);
    await fs.rm(dir, { recursive: true, force: true });
  }
}
