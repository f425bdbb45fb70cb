import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { TSandboxConfig } from "./sandbox-config";
import { SANDBOX_WORKDIR } from "./sandbox-config";
import { sandboxAccountMounts } from "./sandbox-account";

/** Who a workspace's sandboxes run as. `dropped` is false when Berth is not root and cannot change uid. */
export type SandboxIdentity = { uid: number; gid: number; dropped: boolean };

/** Stable key of a workspace: names its process registry and marks its bwrap processes. */
export function sandboxKey(owner: { tenantId: string; userId: string; workspaceId: string }): string {
  return createHash("sha256")
    .update(`${owner.tenantId}\0${owner.userId}\0${owner.workspaceId}`)
    .digest("hex")
    .slice(0, 24);
}

/**
 * Root drops to a per-workspace uid from the configured range. Any other user cannot change uid: its
 * sandboxes keep its uid on the host (inside a user namespace, with only the mounts below visible).
 */
export function sandboxIdentity(config: TSandboxConfig, key: string, hostUid = process.getuid?.() ?? 0) {
  if (hostUid !== 0) {
    const gid = process.getgid?.() ?? hostUid;
    return { uid: hostUid, gid, dropped: false } satisfies SandboxIdentity;
  }
  const uid = config.uidBase + (Number.parseInt(key.slice(0, 12), 16) % config.uidCount);
  return { uid, gid: uid, dropped: true } satisfies SandboxIdentity;
}

/** The marker put in every sandbox's argv, so a stop can tell our processes from a reused pid. */
export const SANDBOX_MARKER_ENV = "BERTH_SANDBOX";

export type SandboxMount = { hostFd: number; target: string; readOnly?: boolean };

export type SandboxProfile = {
  key: string;
  identity: SandboxIdentity;
  /** Inside the sandbox. */
  cwd: string;
  /** fd (as numbered in the child) of the workspace directory, opened by the caller. */
  workdirFd: number;
  /** Further fd-based mounts (the gateway's runtime dir and code). */
  mounts?: SandboxMount[];
  /** Mount an empty tmpfs here first (where `mounts` go, e.g. /run). */
  tmpfs?: string[];
  /** The workspace's cgroups (`cgroup.procs` files: memory, and v1's cpuacct), joined before anything runs. */
  cgroupProcs?: string[];
};

/**
 * What runs before prlimit when Berth is root: the sandbox's first process joins the workspace's memory
 * cgroup (still root, the only one allowed to) and then drops to the workspace uid and gid with no
 * supplementary groups (util-linux setpriv), so that nothing of the workspace runs as root or outside
 * its group. Not root: neither is possible, and the process already has Berth's (unprivileged) uid.
 */
function privilegedPrefix(config: TSandboxConfig, profile: SandboxProfile): string[] {
  const { uid, gid, dropped } = profile.identity;
  if (!dropped) return [];
  // $0: how many group files follow; each gets the shell's pid, then the shell becomes the command.
  const join = profile.cgroupProcs?.length
    ? [
        "/bin/sh",
        "-c",
        'n=$0; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; n=$((n - 1)); done; exec "$@"',
        String(profile.cgroupProcs.length),
        ...profile.cgroupProcs,
      ]
    : [];
  return [...join, config.setprivPath, `--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--"];
}

/** Top-level host entries that hold the system; symlinks (merged /usr) are recreated as symlinks. */
const SYSTEM_ENTRIES = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"];

/**
 * The argv of one sandbox: `[join the cgroup, setpriv] prlimit … bwrap … -- <command>`. The system is read-only, the workspace is
 * the only writable host path (at /workspace), /tmp is private, /proc shows only the sandbox's pid
 * namespace, and the network is a private namespace unless the operator allowed the host's.
 */
export function sandboxArgv(
  config: TSandboxConfig,
  profile: SandboxProfile,
  command: readonly string[],
  /**
   * The sandbox runs on a terminal of its own (a dashboard terminal's PTY): it keeps that terminal as its
   * controlling terminal, so the shell has job control and sees window resizes (SIGWINCH). What
   * `--new-session` guards against, TIOCSTI input injection into the terminal Berth runs in, cannot happen
   * there: the only terminal it can reach is its own. Every other confinement is the same.
   */
  options: { ownTerminal?: boolean } = {},
) {
  const { uid, gid } = profile.identity;
  const args: string[] = [
    ...privilegedPrefix(config, profile),
    config.prlimitPath,
    `--nproc=${config.pidsLimit}`,
    "--core=0",
    "--",
    config.bwrapPath,
    "--unshare-user",
    "--uid",
    String(uid),
    "--gid",
    String(gid),
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(config.network ? [] : ["--unshare-net"]),
    "--die-with-parent",
    ...(options.ownTerminal ? [] : ["--new-session"]),
    "--hostname",
    "berth",
    "--setenv",
    SANDBOX_MARKER_ENV,
    profile.key,
    ...systemMounts(),
    ...sandboxAccountMounts(config.runtimeRoot, profile.identity),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    // The private /tmp first: bwrap mounts in order, so an operator's read-only path or Node under /tmp
    // (an install in /tmp/…) would otherwise be hidden by the empty tmpfs mounted over it.
    "--tmpfs",
    "/tmp",
    ...config.readOnlyPaths.flatMap((p) => ["--ro-bind-try", p, p]),
    ...nodeMount(),
    ...(profile.tmpfs ?? []).flatMap((dir) => ["--tmpfs", dir]),
    "--bind-fd",
    String(profile.workdirFd),
    SANDBOX_WORKDIR,
    ...(profile.mounts ?? []).flatMap((mount) => [
      mount.readOnly ? "--ro-bind-fd" : "--bind-fd",
      String(mount.hostFd),
      mount.target,
    ]),
    "--chdir",
    profile.cwd,
    "--",
    ...command,
  ];
  return args;
}

let cachedSystemMounts: string[] | null = null;

function systemMounts(): string[] {
  cachedSystemMounts ??= SYSTEM_ENTRIES.flatMap((name) => {
    const host = `/${name}`;
    const info = fs.lstatSync(host, { throwIfNoEntry: false });
    if (!info) return [];
    if (info.isSymbolicLink()) return ["--symlink", fs.readlinkSync(host), host];
    return info.isDirectory() ? ["--ro-bind", host, host] : [];
  });
  return cachedSystemMounts;
}

/** Berth's own Node (the gateway runs on it) when it lives outside the system folders (nvm, /opt). */
function nodeMount(): string[] {
  const real = fs.realpathSync(process.execPath);
  const top = real.split("/")[1] ?? "";
  if (SYSTEM_ENTRIES.includes(top)) return [];
  const prefix = path.dirname(path.dirname(real));
  return ["--ro-bind", prefix, prefix];
}
