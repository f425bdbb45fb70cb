import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { SANDBOX_MARKER_ENV } from "./sandbox-args";

/**
 * Every running sandbox of a workspace, from every Berth process of the machine: one empty file
 * `<runtimeRoot>/procs/<key>/<pid>` per outer bwrap process, created when it starts and removed when it
 * exits. A stop or purge (run by a worker) kills them all, including the MCP gateways API processes
 * started. Killing the outer bwrap ends the whole sandbox: its init gets SIGKILL (--die-with-parent) and
 * the kernel then kills every process left in the pid namespace.
 */
export class SandboxRegistry {
  constructor(private readonly runtimeRoot: string) {}

  private dirOf(key: string): string {
    return path.join(this.runtimeRoot, "procs", key);
  }

  /** Synchronous: called between spawn and the first event loop turn, so a stop cannot miss it. */
  record(key: string, pid: number): void {
    const dir = this.dirOf(key);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(dir, String(pid)), "", { mode: 0o600 });
  }

  forget(key: string, pid: number): void {
    fs.rmSync(path.join(this.dirOf(key), String(pid)), { force: true });
  }

  /** Pids on record that are still this workspace's sandboxes (a pid reused by anything else is skipped). */
  async live(key: string): Promise<number[]> {
    const names = await fsp.readdir(this.dirOf(key)).catch(() => [] as string[]);
    const live: number[] = [];
    for (const name of names) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid <= 1) continue;
      if (await isSandboxOf(pid, key)) live.push(pid);
      else this.forget(key, pid);
    }
    return live;
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
      while (fs.existsSync(`/proc/${pid}`) && (await isSandboxOf(pid, key)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      this.forget(key, pid);
    }
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
