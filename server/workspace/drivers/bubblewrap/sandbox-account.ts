import fs from "node:fs";
import path from "node:path";
import { SANDBOX_WORKDIR } from "./sandbox-config";

/** The account name a workspace's uid has inside its sandboxes. */
const SANDBOX_USER = "agent";

/** The identities this process has written files for (a file is only rewritten when it vanished). */
const written = new Set<string>();

/**
 * A workspace's uid has no entry in the host's /etc/passwd (root drops to a uid from a range that holds no
 * real users). Without one, the shell's prompt reads "I have no name!", `whoami` and `id -un` fail, and
 * tools that look the user up (git, ssh, Python's getpass and pip) refuse to run. The sandbox sees the host's
 * /etc read-only, so the bwrap arguments mount these two files over /etc/passwd and /etc/group: the host's
 * entries plus one for the workspace's uid and gid, named `agent`, with its home at the workspace.
 * Returns `--ro-bind` arguments, or none when the host already knows the uid (Berth not root).
 */
export function sandboxAccountMounts(runtimeRoot: string, identity: { uid: number; gid: number }): string[] {
  const { uid, gid } = identity;
  const hostPasswd = readOr("/etc/passwd");
  if (hasEntry(hostPasswd, uid)) return [];
  const dir = path.join(runtimeRoot, "accounts");
  const passwdFile = path.join(dir, `${uid}.passwd`);
  const groupFile = path.join(dir, `${gid}.group`);
  const key = `${dir}\0${uid}\0${gid}`;
  if (!written.has(key) || !fs.existsSync(passwdFile) || !fs.existsSync(groupFile)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    const shell = fs.existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";
    writeAtomically(
      passwdFile,
      `${withNewline(hostPasswd)}${SANDBOX_USER}:x:${uid}:${gid}:Berth workspace:${SANDBOX_WORKDIR}:${shell}\n`,
    );
    const hostGroup = readOr("/etc/group");
    writeAtomically(
      groupFile,
      hasEntry(hostGroup, gid) ? hostGroup : `${withNewline(hostGroup)}${SANDBOX_USER}:x:${gid}:\n`,
    );
    written.add(key);
  }
  return ["--ro-bind", passwdFile, "/etc/passwd", "--ro-bind", groupFile, "/etc/group"];
}

function readOr(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

/** Whether a passwd or group file has an entry with this numeric id (the third field in both). */
function hasEntry(file: string, id: number): boolean {
  return file.split("\n").some((line) => line.split(":")[2] === String(id));
}

function withNewline(text: string): string {
  return text === "" || text.endsWith("\n") ? text : `${text}\n`;
}

/** Concurrent sandboxes (and Berth processes) may write the same file: each renames a complete copy in. */
function writeAtomically(file: string, content: string): void {
  const temporary = `${file}.${process.pid}.${Date.now()}.tmp`;
  fs.writeFileSync(temporary, content, { mode: 0o644 });
  fs.renameSync(temporary, file);
}
