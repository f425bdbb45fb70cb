import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { SANDBOX_MARKER_ENV } from "./sandbox-args";
import { endWorkspaceCgroup, workspaceCgroup, type SandboxCgroups } from "./sandbox-cgroup";

/**
 * Every running sandbox of a workspace, from every Berth process of the machine: one empty file
 * `<runtimeRoot>/procs/<key>/<pid>` per outer bwrap process, created when it starts and removed when it
 * exits. A stop or purge (run by a worker) kills them all, including the MCP gateways API processes
 * started. Killing the outer bwrap ends the whole sandbox: its init gets SIGKILL (--die-with-parent) and
 * the kernel then kills every process left in the pid namespace. It also holds the workspaces' memory
 * cgroups (sandbox-cgroup.ts): a stop removes the group once its sandboxes are gone.
 */
export class SandboxRegistry {
  constructor(
    private readonly runtimeRoot: string,
    readonly cgroups: SandboxCgroups = { available: false, reason: "not configured" },
  ) {}

  /** The `cgroup.procs` files a new sandbox of the workspace joins, or undefined when none can be made. */
  cgroupOf(key: string): string[] | undefined {
    return this.cgroups.available ? workspaceCgroup(this.cgroups, key) : undefined;
  }

  private dirOf(key: string): string {
    return path.join(this.runtimeRoot, "procs", key);
  }

  /**
   * Synchronous: called between spawn and the first event loop turn, so a stop cannot miss it. The file
   * holds the process' start time, which tells it from a later process given the same pid.
   */
  record(key: string, pid: number): void {
    const dir = this.dirOf(key);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(dir, String(pid)), startTimeOf(pid) ?? "", { mode: 0o600 });
  }

  forget(key: string, pid: number): void {
    fs.rmSync(path.join(this.dirOf(key), String(pid)), { force: true });
  }

  /**
   * Pids on record that are still this workspace's sandboxes (a pid reused by anything else is skipped).
   * Identity is the start time, not the command line: a sandbox that is still starting runs a chain of
   * execs (sh, setpriv, prlimit, bwrap) and its command line changes on the way, and a stop at that
   * moment must still find it.
   */
  async live(key: string): Promise<number[]> {
    const names = await fsp.readdir(this.dirOf(key)).catch(() => [] as string[]);
    const live: number[] = [];
    for (const name of names) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid <= 1) continue;
      if (await this.isRecorded(key, pid)) live.push(pid);
      else this.forget(key, pid);
    }
    return live;
  }

  private async isRecorded(key: string, pid: number): Promise<boolean> {
    const recorded = await fsp.readFile(path.join(this.dirOf(key), String(pid)), "utf8").catch(() => null);
    const started = startTimeOf(pid);
    if (recorded === null || started === null) return false;
    // A record without a start time (written by an older Berth): the marker in its argv decides.
    return recorded === "" ? isSandboxOf(pid, key) : recorded === started;
  }

  /** SIGKILLs every sandbox of the workspace and waits (bounded) until they are gone. Returns how many. */
  async killAll(key: string, waitMs = 10_000): Promise<number> {
    const pids = await this.live(key);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    const deadline = Date.now() + waitMs;
    for (const pid of pids) {
      while ((await this.isRecorded(key, pid)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      this.forget(key, pid);
    }
    await endWorkspaceCgroup(this.cgroups, key);
    return pids.length;
  }
}

/** The pid runs bwrap with this workspace's marker in its argv. */
async function isSandboxOf(pid: number, key: string): Promise<boolean> {
  const cmdline = await fsp.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
  const argv = cmdline.split("\0");
  const marker = argv.indexOf(SANDBOX_MARKER_ENV);
  return marker > 0 && argv[marker - 1] === "--setenv" && argv[marker + 1] === key;
}

/**
 * The start time of a running process (field 22 of /proc/<pid>/stat, in clock ticks since boot), or null
 * when there is none or it has exited (a zombie waiting for its parent counts as gone).
 */
function startTimeOf(pid: number): string | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (fields[0] === "Z" || fields[0] === "X") return null;
  return fields[19] ?? null;
}
