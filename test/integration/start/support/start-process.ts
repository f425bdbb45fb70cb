import { spawn, type ChildProcess } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { connect } from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..", "..");

export type StartedBerth = {
  readonly child: ChildProcess;
  /** Every stdout/stderr line so far. */
  readonly lines: string[];
  /** Resolves with the first line matching `re` (already printed or later); rejects if the process exits first. */
  waitFor(re: RegExp): Promise<string>;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  readonly exited: Promise<number | null>;
  /** SIGTERM (to the process group when started through npm), then waits for the exit. */
  stop(): Promise<number | null>;
};

/** Variables a fresh clone has none of: without them `npm start` runs the embedded services and generates secrets. */
export const FRESH_MACHINE_UNSET = [
  "DATABASE_URL",
  "REDIS_URL",
  "BERTH_REDIS_PREFIX",
  "BERTH_AUTH_SECRET",
  "BERTH_ENCRYPTION_KEY",
  "NODE_ENV",
] as const;

/**
 * Starts Berth the way a user does. `via: "npm"` runs `npm start` itself (npm → sh → node, as in a terminal)
 * as the leader of its own process group, so a test can signal npm alone or the whole group the way Ctrl-C
 * and process managers do; `via: "node"` runs scripts/start.ts in one process, what `npm start` ends up
 * executing. `env` is the whole environment (start from `process.env`, delete what a fresh machine lacks).
 * `dev`: `npm run dev` instead (scripts/start.ts --dev).
 */
export function startBerthProcess(options: {
  via: "npm" | "node";
  port: number;
  env: NodeJS.ProcessEnv;
  dev?: boolean;
}): StartedBerth {
  const env: NodeJS.ProcessEnv = { ...options.env, PORT: String(options.port), NEXT_TELEMETRY_DISABLED: "1" };
  const child =
    options.via === "npm"
      ? spawn("npm", options.dev ? ["run", "dev", "--silent"] : ["start", "--silent"], {
          cwd: REPO_ROOT,
          env,
          stdio: ["ignore", "pipe", "pipe"],
          detached: true,
        })
      : spawn(process.execPath, ["--import", "tsx", "scripts/start.ts", ...(options.dev ? ["--dev"] : [])], {
          cwd: REPO_ROOT,
          env,
          stdio: ["ignore", "pipe", "pipe"],
        });
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (line: string) => void }[] = [];
  const onLine = (line: string) => {
    lines.push(line);
    for (const waiter of [...waiters]) {
      if (waiter.re.test(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  };
  createInterface({ input: child.stdout }).on("line", onLine);
  createInterface({ input: child.stderr }).on("line", onLine);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const exitedEarly = (re: RegExp) =>
    exited.then((code) => {
      throw new Error(`npm start exited (${code}) before printing ${re}:\n${lines.slice(-40).join("\n")}`);
    });
  return {
    child,
    lines,
    exited,
    waitFor: (re) => {
      const seen = lines.find((line) => re.test(line));
      if (seen) return Promise.resolve(seen);
      return Promise.race([new Promise<string>((resolve) => waiters.push({ re, resolve })), exitedEarly(re)]);
    },
    stop: () => {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      if (options.via === "npm") process.kill(-child.pid!, "SIGTERM");
      else child.kill("SIGTERM");
      return exited;
    },
  };
}

/**
 * Waits until Berth answers its sign-in page (the server is up and Next serves). Fails as soon as the
 * process exits, with its last lines, instead of polling a dead process until the timeout. A plain poll,
 * not `vi.waitFor`: the e2e global setup (test/setup/e2e-shared.ts) starts Berth outside any test worker,
 * where Vitest's `vi` has no state to run on.
 */
export async function waitUntilServing(
  berth: StartedBerth,
  baseUrl: string,
  timeout = 840_000,
): Promise<void> {
  const deadline = Date.now() + timeout;
  let exited = false;
  const serving = (async () => {
    for (;;) {
      let notYet: unknown;
      try {
        if (!berth.lines.some((line) => line.includes("Berth is running at")))
          throw new Error("not running yet");
        const response = await fetch(`${baseUrl}/sign-in`);
        if (response.status === 200) return;
        throw new Error(`sign-in page answered ${response.status}`);
      } catch (error) {
        notYet = error;
      }
      if (exited) return;
      if (Date.now() > deadline) throw notYet;
      await delay(500);
    }
  })();
  const died = berth.exited.then((code) => {
    exited = true;
    throw new Error(`berth exited with ${code} before serving:\n${berth.lines.slice(-60).join("\n")}`);
  });
  await Promise.race([serving, died]);
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** True while a process with this pid exists (signal 0 probes without signalling). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Every live descendant of `pid` (children, their children, ...), from /proc. */
export async function descendantPids(pid: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after the last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid) parentOf.set(Number(entry), ppid);
  }
  const found: number[] = [];
  const frontier = [pid];
  while (frontier.length) {
    const parent = frontier.pop()!;
    for (const [child, ppid] of parentOf) {
      if (ppid === parent) {
        found.push(child);
        frontier.push(child);
      }
    }
  }
  return found;
}
