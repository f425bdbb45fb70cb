import { spawn } from "node:child_process";
import fsp from "node:fs/promises";
import { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { TSandboxConfig } from "./sandbox-config";
import type { SandboxRegistry } from "./sandbox-registry";

/**
 * Preview tunnels on the bubblewrap driver. Not through the gateway, unlike Docker: every sandbox (each
 * command, each terminal, the gateway itself) gets a network namespace of its own (`--unshare-net`), so the
 * gateway's loopback is not the loopback a dev server started by a command listens on. Instead Berth finds
 * the sandbox of the workspace whose namespace has a listener on the port (its `/proc/<pid>/net/tcp*`) and
 * runs a relay there: `nsenter --net` into that namespace only (the host's mounts, Berth's own Node and
 * fixed script below, which only connects to 127.0.0.1:port and copies bytes), whose stdio is the tunnel.
 * Entering another user namespace's network needs CAP_SYS_ADMIN over it: root only (where sandboxes
 * get uids of their own anyway). With the host's network shared (BERTH_SANDBOX_NETWORK=1) the loopback would
 * be the host's, Berth's and other workspaces' ports included: refused.
 */
const RELAY = [
  'const net = require("node:net");',
  'const socket = net.connect({ host: "127.0.0.1", port: Number(process.argv[1]), allowHalfOpen: true });',
  // One byte says "connected" before any of the app's; a failure is the exit code and stderr instead.
  'socket.once("connect", () => { process.stdout.write("+"); process.stdin.pipe(socket); socket.pipe(process.stdout); });',
  'socket.on("error", (e) => { process.stderr.write(String(e.code)); process.exit(socket.connecting ? 2 : 3); });',
  'process.stdin.on("error", () => socket.destroy()); process.stdout.on("error", () => socket.destroy());',
].join("\n");

const RELAY_ENV: Record<string, string> = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" };

export type SandboxTunnelHost = {
  config: TSandboxConfig;
  key: string;
  registry: SandboxRegistry;
};

/** Whether this process can tunnel into sandboxes at all (the driver's `capabilities.previews`). */
export function sandboxTunnelsAvailable(config: TSandboxConfig): boolean {
  return !config.network && process.getuid?.() === 0;
}

export async function openSandboxTunnel(host: SandboxTunnelHost, port: number): Promise<Duplex> {
  if (!sandboxTunnelsAvailable(host.config)) {
    throw new AppError("UNPROCESSABLE", "bubblewrap previews need root and private sandbox networks", {
      userMessage:
        "Previews on this workspace's backend need Berth to run as root with private sandbox networks (BERTH_SANDBOX_NETWORK unset).",
      details: { reason: "previews_unsupported" },
    });
  }
  const pid = await listenerSandboxPid(await host.registry.live(host.key), port);
  if (pid === null) {
    throw new AppError("BAD_GATEWAY", `no sandbox of ${host.key} listens on ${port}`, {
      userMessage: `Nothing is listening on port ${port} inside the workspace.`,
      details: { reason: "port_not_listening", port },
    });
  }
  return startRelay(pid, port);
}

/** A process in the first network namespace (of the workspace's sandboxes) with a listener on `port`. */
async function listenerSandboxPid(outerPids: readonly number[], port: number): Promise<number | null> {
  if (outerPids.length === 0) return null;
  const hostNet = await fsp.readlink("/proc/self/ns/net");
  const seen = new Set<string>([hostNet]);
  for (const pid of await descendantsOf(outerPids)) {
    const netns = await fsp.readlink(`/proc/${pid}/ns/net`).catch(() => null);
    if (netns === null || seen.has(netns)) continue;
    seen.add(netns);
    if (await listensOn(pid, port)) return pid;
  }
  return null;
}

/** Every live process below `roots` (one pass over /proc: bwrap forks its namespace's init and the command). */
async function descendantsOf(roots: readonly number[]): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const name of await fsp.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fsp.readFile(`/proc/${name}/stat`, "utf8").catch(() => null);
    if (stat === null) continue;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so split after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const siblings = children.get(ppid) ?? [];
    siblings.push(Number(name));
    children.set(ppid, siblings);
  }
  const found: number[] = [];
  const queue = [...roots];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    for (const child of children.get(pid) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** A LISTEN socket (state 0A) on `port` on loopback or any address, in the process' network namespace. */
async function listensOn(pid: number, port: number): Promise<boolean> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["tcp", "tcp6"]) {
    const text = await fsp.readFile(`/proc/${pid}/net/${table}`, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state === "0A" && local?.endsWith(`:${hexPort}`)) return true;
    }
  }
  return false;
}

/** The relay in `pid`'s network namespace; resolves once it connected (its "+" arrived). */
function startRelay(pid: number, port: number): Promise<Duplex> {
  const child = spawn(
    "nsenter",
    [`--target=${pid}`, "--net", "--", process.execPath, "-e", RELAY, String(port)],
    // Nothing of Berth's environment (its secrets) reaches the relay.
    { stdio: ["pipe", "pipe", "pipe"], env: RELAY_ENV as NodeJS.ProcessEnv },
  );
  return new Promise<Duplex>((resolve, reject) => {
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 2000) stderr += chunk.toString("utf8");
    });
    const onExit = (code: number | null) => {
      reject(
        new AppError("BAD_GATEWAY", `tunnel relay to ${port} exited ${code}: ${stderr.trim()}`, {
          userMessage: stderr.includes("ECONNREFUSED")
            ? `Nothing is listening on port ${port} inside the workspace.`
            : `Port ${port} inside the workspace could not be reached.`,
          details: { port, ...(stderr.includes("ECONNREFUSED") ? { reason: "port_not_listening" } : {}) },
        }),
      );
    };
    child.once("exit", onExit);
    child.once("error", (error) =>
      reject(new AppError("UNAVAILABLE", `nsenter: ${error.message}`, { cause: error })),
    );
    child.stdout.once("readable", function first() {
      const marker = child.stdout.read(1) as Buffer | null;
      if (marker === null) {
        child.stdout.once("readable", first);
        return;
      }
      child.off("exit", onExit);
      const tunnel = Duplex.from({ readable: child.stdout, writable: child.stdin });
      // Ended or destroyed by the caller: the relay has nothing left to do.
      tunnel.once("close", () => child.kill("SIGKILL"));
      resolve(tunnel);
    });
  });
}
