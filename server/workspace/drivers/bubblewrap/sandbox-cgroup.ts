import fs from "node:fs";
import path from "node:path";

/**
 * One memory cgroup per workspace, shared by all its sandboxes (commands, the gateway and its MCP
 * servers), so one workspace cannot take the host's memory: the kernel OOM-kills inside the group at the
 * limit, swap included. RLIMIT_AS would be no substitute: V8 reserves far more address space than it uses.
 *
 * Only root can create cgroups here (Berth drops to the workspace uid afterwards). Each sandbox joins its
 * group before anything runs in it: a root shell writes its own pid into `cgroup.procs`, then execs the
 * uid drop and bwrap, so no process of the sandbox ever starts outside the group.
 */
export type SandboxCgroups =
  | {
      available: true;
      version: 1 | 2;
      root: string;
      limitBytes: number;
      /**
       * cgroup v1 only: the CPU accounting hierarchy's group (`cpuacct`, mounted apart from `memory`), which
       * sandboxes join too, so a workspace's CPU time can be told. Null on v2 (one group keeps `cpu.stat`)
       * or when v1 has no writable cpuacct mount.
       */
      cpuRoot: string | null;
    }
  | { available: false; reason: string };

const V1_MEMORY = "/sys/fs/cgroup/memory";
const V1_CPUACCT = "/sys/fs/cgroup/cpuacct";
const V2_ROOT = "/sys/fs/cgroup";
const GROUP = "berth-sandbox";

/** Where workspace groups can live on this host, or why none can. */
export function detectCgroups(limitBytes: number, hostUid = process.getuid?.() ?? 0): SandboxCgroups {
  if (hostUid !== 0) return { available: false, reason: "Berth is not root, so it cannot create cgroups" };
  try {
    if (fs.existsSync(path.join(V2_ROOT, "cgroup.controllers"))) {
      const controllers = fs.readFileSync(path.join(V2_ROOT, "cgroup.controllers"), "utf8").split(/\s+/);
      if (!controllers.includes("memory")) {
        return { available: false, reason: "the cgroup v2 hierarchy offers no memory controller" };
      }
      const root = path.join(V2_ROOT, GROUP);
      fs.mkdirSync(root, { recursive: true });
      // Children of the group get the memory controller; the group itself holds no process (v2's rule).
      enableControllers(path.join(V2_ROOT, "cgroup.subtree_control"));
      enableControllers(path.join(root, "cgroup.subtree_control"));
      return { available: true, version: 2, root, limitBytes, cpuRoot: null };
    }
    if (fs.existsSync(path.join(V1_MEMORY, "memory.limit_in_bytes"))) {
      const root = path.join(V1_MEMORY, GROUP);
      fs.mkdirSync(root, { recursive: true });
      return { available: true, version: 1, root, limitBytes, cpuRoot: v1CpuRoot() };
    }
    return { available: false, reason: "no cgroup memory controller is mounted under /sys/fs/cgroup" };
  } catch (error) {
    return { available: false, reason: `cgroups are not writable: ${(error as Error).message}` };
  }
}

/** The v1 cpuacct group for workspaces, or null when the hierarchy is absent or not writable. */
function v1CpuRoot(): string | null {
  if (!fs.existsSync(path.join(V1_CPUACCT, "cpuacct.usage"))) return null;
  try {
    const root = path.join(V1_CPUACCT, GROUP);
    fs.mkdirSync(root, { recursive: true });
    return root;
  } catch {
    return null;
  }
}

function enableControllers(subtreeControl: string): void {
  const enabled = fs.readFileSync(subtreeControl, "utf8");
  if (!/\bmemory\b/.test(enabled)) fs.writeFileSync(subtreeControl, "+memory");
}

/**
 * The group of one workspace, created on first use with its limit. Returns the `cgroup.procs` files a
 * sandbox writes its pid into: the memory group's, and on v1 the cpuacct group's as well.
 */
export function workspaceCgroup(cgroups: SandboxCgroups & { available: true }, key: string): string[] {
  const dir = path.join(cgroups.root, key);
  fs.mkdirSync(dir, { recursive: true });
  const limit = String(cgroups.limitBytes);
  if (cgroups.version === 2) {
    fs.writeFileSync(path.join(dir, "memory.max"), limit);
    writeIfPresent(path.join(dir, "memory.swap.max"), "0");
  } else {
    // memsw (memory + swap) may never be below the memory limit: lift it, set the limit, then cap memsw
    // at the same value (no swap).
    writeIfPresent(path.join(dir, "memory.memsw.limit_in_bytes"), "-1");
    fs.writeFileSync(path.join(dir, "memory.limit_in_bytes"), limit);
    writeIfPresent(path.join(dir, "memory.memsw.limit_in_bytes"), limit);
  }
  const procs = [path.join(dir, "cgroup.procs")];
  if (cgroups.cpuRoot) {
    const cpuDir = path.join(cgroups.cpuRoot, key);
    fs.mkdirSync(cpuDir, { recursive: true });
    procs.push(path.join(cpuDir, "cgroup.procs"));
  }
  return procs;
}

function writeIfPresent(file: string, value: string): void {
  if (fs.existsSync(file)) fs.writeFileSync(file, value);
}

/**
 * Ends every process left in a workspace's group and removes the group: what a stop does after killing
 * the sandboxes on record. The group is the complete list, whatever the pid namespaces hide: a sandbox
 * killed while it was still being set up can leave its inner init orphaned (bwrap's --die-with-parent
 * is not armed yet), and only the group still knows it. Bounded; a group that stays busy is left for the
 * next stop.
 */
export async function endWorkspaceCgroup(cgroups: SandboxCgroups, key: string, waitMs = 5_000) {
  if (!cgroups.available) return;
  const dir = path.join(cgroups.root, key);
  const deadline = Date.now() + waitMs;
  for (;;) {
    for (const pid of processesIn(dir)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // exited meanwhile
      }
    }
    try {
      fs.rmdirSync(dir);
      // The cpuacct group held the same processes, all gone now; absent when none was made.
      if (cgroups.cpuRoot) removeGroup(path.join(cgroups.cpuRoot, key));
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "EBUSY" || Date.now() > deadline) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function removeGroup(dir: string): void {
  try {
    fs.rmdirSync(dir);
  } catch {
    // absent (made before sandboxes joined cpuacct), or the next stop removes it
  }
}

function processesIn(dir: string): number[] {
  try {
    return fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * What a workspace's group says about its processes now: memory in use (`memory.current`, v1's
 * `memory.usage_in_bytes`), CPU time (v2's `cpu.stat` usage_usec, kept by every v2 group; v1's
 * `cpuacct.usage`, nanoseconds, of the workspace's cpuacct group; none when that group is missing) and how
 * many processes it holds. A workspace with no group yet (no
 * sandbox ran since the last stop) holds nothing. Null when this host has no groups (Berth not root).
 */
export function workspaceCgroupUsage(
  cgroups: SandboxCgroups,
  key: string,
): { cpuSeconds: number | null; memoryBytes: number; processes: number } | null {
  if (!cgroups.available) return null;
  const dir = path.join(cgroups.root, key);
  if (!fs.existsSync(dir)) return { cpuSeconds: 0, memoryBytes: 0, processes: 0 };
  const read = (file: string) => {
    try {
      return fs.readFileSync(path.join(dir, file), "utf8");
    } catch {
      return null;
    }
  };
  const memory = read(cgroups.version === 2 ? "memory.current" : "memory.usage_in_bytes");
  return {
    cpuSeconds: cpuSecondsOf(cgroups, key, read),
    memoryBytes: memory === null ? 0 : Number(memory.trim()) || 0,
    processes: processesIn(dir).length,
  };
}

function cpuSecondsOf(
  cgroups: SandboxCgroups & { available: true },
  key: string,
  read: (file: string) => string | null,
): number | null {
  if (cgroups.version === 2) {
    const usec = /^usage_usec (\d+)$/m.exec(read("cpu.stat") ?? "")?.[1];
    return usec === undefined ? null : Number(usec) / 1e6;
  }
  if (!cgroups.cpuRoot) return null;
  try {
    return Number(fs.readFileSync(path.join(cgroups.cpuRoot, key, "cpuacct.usage"), "utf8").trim()) / 1e9;
  } catch {
    return null; // a group made before sandboxes joined cpuacct too
  }
}
