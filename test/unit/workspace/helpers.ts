import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";

/** A fresh, real temporary directory (realpath'd, since /tmp may be a symlink) and a HostFolderMachine on it. */
export async function makeTempMachine(prefix = "berth-ws-"): Promise<{
  root: string;
  workdir: string;
  machine: HostFolderMachine;
  cleanup: () => Promise<void>;
}> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  const workdir = path.join(root, "workdir");
  await fs.mkdir(workdir);
  return {
    root,
    workdir,
    machine: new HostFolderMachine({ workdir }),
    cleanup: () => fs.rm(root, { recursive: true, force: true }),
  };
}

export async function streamToString(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}
