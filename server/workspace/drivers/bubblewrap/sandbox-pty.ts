import path from "node:path";
import { spawnHostPty } from "@/server/workspace/drivers/bubblewrap/host-pty";
import { DEFAULT_PTY_COMMAND, type PtyOptions, type PtyProcess } from "@/server/workspace/drivers/port";
import { sandboxArgv, type SandboxIdentity } from "./sandbox-args";
import { SANDBOX_WORKDIR, type TSandboxConfig } from "./sandbox-config";
import type { SandboxRegistry } from "./sandbox-registry";

/**
 * A dashboard terminal of the confined `local` backend: a host PTY (node-pty) whose process is the same
 * `prlimit … bwrap … -- <shell>` sandbox as every command's (same mounts, namespaces, uid and limits, and
 * recorded in the workspace's process registry, so a stop or purge ends it). Differences, and why:
 *
 * - node-pty cannot pass extra fds, so the workspace folder reaches bwrap's `--bind-fd 3` through a tiny
 *   `sh` that opens it as Berth (root) first, as `runSandboxed` does with `extraFds`;
 * - the uid drop is sandboxArgv's own (join the memory cgroup as root, then `setpriv --clear-groups`), as
 *   for every command: node-pty could not drop supplementary groups itself;
 * - no `--new-session` (see `sandboxArgv`'s `ownTerminal`); no timeout: the caller kills it.
 */
export type SandboxPtyContext = {
  config: TSandboxConfig;
  hostWorkdir: string;
  key: string;
  identity: SandboxIdentity;
  registry: SandboxRegistry;
  env: Record<string, string>;
};

// $1 is the workspace folder: opened on fd 3 (without close-on-exec), then the rest of argv runs with it.
const OPEN_WORKDIR_ON_FD3 = 'exec 3<"$1" || exit 126; shift; exec "$@"';

export function openSandboxPty(context: SandboxPtyContext, options: PtyOptions): Promise<PtyProcess> {
  const { config, key, identity, registry } = context;
  const cwd = path.posix.resolve(SANDBOX_WORKDIR, options.cwd ?? SANDBOX_WORKDIR);
  const sandbox = sandboxArgv(
    config,
    { key, identity, cwd, workdirFd: 3, cgroupProcs: registry.cgroupOf(key) },
    options.command ?? DEFAULT_PTY_COMMAND,
    { ownTerminal: true },
  );
  return spawnHostPty({
    file: "/bin/sh",
    args: ["-c", OPEN_WORKDIR_ON_FD3, "berth-pty", context.hostWorkdir, ...sandbox],
    cols: options.cols,
    rows: options.rows,
    cwd: "/",
    env: { TERM: "xterm-256color", ...context.env, ...options.env },
    onSpawn: (pid) => registry.record(key, pid),
    onExit: (pid) => registry.forget(key, pid),
  });
}
